--[[
  refund: give a dead-lettered guess its payment back, once, with a ledger entry naming the JOB.

  Called by codemojex.refunds.refund (the score worker when it dead-letters a job itself, its periodic
  pass over the dead set, and the operator's `codemojex refund`). Atomic, and fenced on the row's state
  rather than on a token: the refund happens only while the job is `dead` (the queue's row state, so it
  cannot interleave with retry_dead, which moves the row out of `dead` in one step of its own), only if
  no GES record exists (a scored guess is never refunded), only if submit charged it (charges:<RND>), and
  only once (refunds:<RND> holds a marker per JOB; it is never removed). The credit is exactly the charge
  recorded at submit, in the same currency. Idempotent: any number of runners may call it for the same
  job at once; one refunds, the others answer `already`.

  A dead job whose GES record exists was scored (score.lua wrote its effect) but its completion was lost
  (the effect-without-ack fault, or a worker that died after the effect on its last try, which the sweep
  then dead-lettered): it is not refunded, it is finished instead, in this same step: ZREM dead, ZADD
  done (at now), row state 'done' with 'finished' now and result 'scored' (its 'error' is kept, as the
  history), counted 'completed' and 'dead_finished'. A trimmed dead tombstone is left alone.

  The marker's value is the job's payment state from then on: 'refunded' (charged, refunded: net 0),
  'recharged' (retried after its refund and scored: score.lua charged it again) or 'unpaid' (retried
  after its refund, the wallet could not pay again: score.lua completed it without scoring).

  Input:
    KEYS[1] job      (hash)  emq:{t}:job:<JOB>, the queue's row
    KEYS[2] guess    (hash)  cmx:{t}:guess:<GES>, the scored record (must not exist)
    KEYS[3] player   (hash)  cmx:{t}:player:<PLR>
    KEYS[4] wallet   (hash)  currency -> balance
    KEYS[5] ledger   (list)  append-only JSON entries
    KEYS[6] charges  (hash)  cmx:{t}:charges:<RND>, JOB -> 'currency=amount' charged at submit
    KEYS[7] refunds  (hash)  cmx:{t}:refunds:<RND>, JOB -> 'refunded' | 'recharged' | 'unpaid'
    KEYS[8] dead     (zset)  emq:{t}:dead, the bus's dead-lettered ids
    KEYS[9] done     (zset)  emq:{t}:done, the bus's finished ids by finish time
    KEYS[10] stats   (hash)  emq:{t}:stats, the bus's counters

    ARGV[1] job id
    ARGV[2] player id (the row's lane must be this player's)

  Output:
    { 1, charge }  refunded now; charge is 'currency=amount', credited back
    { 0, marker }  refunded before (marker as above); nothing changed
    {-1, state }   not dead (state, or '' when there is no row, as for a job trimmed to its tombstone,
                   which keeps neither lane nor payload); nothing changed
    {-2, 'done' }  scored (a GES record exists) and dead: finished now (dead -> done, see above)
    {-2, '' }      scored, a dead tombstone trimmed in its row (mid-reshard); nothing changed
    {-3, '' }      not charged in this round (not admitted by submit); nothing changed
    {-4, lane }    the row's lane is not this player; nothing changed
]]
local jobKey, guessKey, playerKey, walletKey, ledgerKey, chargesKey, refundsKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local deadKey, doneKey, statsKey = KEYS[8], KEYS[9], KEYS[10]
local jobId, playerId = ARGV[1], ARGV[2]

-- The row's fields are one letter (echomq's include "row"): 's' state (absent: queued), 'l' lane, 'T'
-- trimmed; 'f' finished, 'x' result.
local row = redis.call('HMGET', jobKey, 's', 'l', 'T')
local marker = redis.call('HGET', refundsKey, jobId)
if marker then return {0, marker} end
if row[1] ~= 'dead' then return {-1, row[2] and (row[1] or 'queued') or ''} end
if row[2] ~= playerId then return {-4, row[2] or ''} end
if redis.call('EXISTS', guessKey) == 1 then
  if row[3] then return {-2, ''} end
  -- Touch the bus keys before the first write (cluster: a key elsewhere refuses the call unchanged).
  redis.call('ZSCORE', deadKey, jobId)
  redis.call('EXISTS', doneKey, statsKey)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREM', deadKey, jobId)
  redis.call('ZADD', doneKey, now, jobId)
  redis.call('HSET', jobKey, 's', 'done', 'f', now, 'x', 'scored')
  redis.call('HINCRBY', statsKey, 'completed', 1)
  redis.call('HINCRBY', statsKey, 'dead_finished', 1)
  return {-2, 'done'}
end
local charge = redis.call('HGET', chargesKey, jobId)
if not charge or redis.call('EXISTS', playerKey) == 0 then return {-3, ''} end
local currency, amount = string.match(charge, '^([a-z]+)=(%d+)$')

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local balance = redis.call('HINCRBY', walletKey, currency, tonumber(amount))
redis.call('RPUSH', ledgerKey, cjson.encode({at = now, currency = currency, delta = tonumber(amount),
  balance = balance, reason = 'refund', job = jobId}))
redis.call('HSET', refundsKey, jobId, 'refunded')
return {1, charge}
