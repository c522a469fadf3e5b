--[[
  score: the score worker's effect and the fenced completion of its job, in one atomic step.

  Called by codemojex.score_worker.handle. Nothing happens unless the job is active under the caller's
  attempts token (a reaped and re-claimed worker is refused as stale and changes no count). Then the
  effect is idempotent on the job id: the GES record is written only if absent, and only when it is
  written do the counts move (the player's attempts and best feedback on the leaderboard, their proven
  hits, the round's scored set, one event, the submit->scored latency histogram). A redelivered job that
  finds its record runs as a no-op and
  completes. The same member format as codemojex.ranking.board_member keeps the board in rank order.

  A job refunded after it was dead-lettered (refund.lua) and then retried is charged again before it is
  scored (ledger reason 'recharge', the same currency and amount, the JOB named) when the wallet can pay;
  when it cannot, the job completes without a record ('unpaid', result 'unpaid'): never refunded and
  scored for free. KEYS[12..15] serve only this rule.

  Input:
    KEYS[1]  job      (hash)    emq:{t}:job:<JOB>
    KEYS[2]  active   (zset)    claimed ids by lease deadline
    KEYS[3]  done     (zset)    finished ids by finish time
    KEYS[4]  stats    (hash)    queue counters
    KEYS[5]  guess    (hash)    cmx:{t}:guess:<GES>, the record
    KEYS[6]  standing (hash)    player -> leaderboard member
    KEYS[7]  board    (zset)    members at score 0, in rank order
    KEYS[8]  proven   (hash)    position -> key proven a hit
    KEYS[9]  scored   (zset)    the round's GES ids by scoring serial (1, 2, ...: the fold order)
    KEYS[10] events   (stream)  the round's live events
    KEYS[11] latency  (hash)    submit->scored histogram: 'le_<ms>' / 'le_inf' -> count, 'count', 'sum_ms'
    KEYS[12] refunds  (hash)    cmx:{t}:refunds:<RND>, JOB -> 'refunded' | 'recharged' | 'unpaid'
    KEYS[13] charges  (hash)    cmx:{t}:charges:<RND>, JOB -> 'currency=amount' charged at submit
    KEYS[14] wallet   (hash)    the player's balances
    KEYS[15] ledger   (list)    the player's append-only ledger

    ARGV[1]  job id
    ARGV[2]  attempts token (int) from the claim
    ARGV[3]  GES id (the job's body under the GES brand)
    ARGV[4]  round id
    ARGV[5]  player id
    ARGV[6]  guess (JSON list of the keys)
    ARGV[7]  feedback code, one letter a position: H hit, N near, - miss
    ARGV[8]  hits
    ARGV[9]  nears
    ARGV[10] length of the code (hits == length solves)
    ARGV[11] 1: complete the job too (always, but for the fault hook that splits effect and ack); 0: not
    ARGV[12] events kept in the stream, about
    ARGV[13] bus prefix, e.g. 'emq:{cm}:' (ARGV[13..15]: echomq.scripts.finish_args, for complete_job,
             which trims a few expired done rows as it completes: see echomq's includes/trim.lua)
    ARGV[14] result ttl (ms): how long a done row is kept whole
    ARGV[15] dedup window (ms): how long after its finish a tombstone absorbs duplicates

  Output:
    { 1, wrote }  scored (wrote = 1) or found already scored (wrote = 0), and the job completed
    { 2, wrote }  the same without the completion (ARGV[11] = 0; the job stays active)
    { 3, 0 }      refunded and the wallet cannot pay again: completed unscored (result 'unpaid')
    { 0, state }  stale: not active under that token; nothing changed
    {-1, '' }     no row for that job id
]]
local jobKey, activeKey, doneKey, statsKey, guessKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local standingKey, boardKey, provenKey, scoredKey, eventsKey = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local latencyKey = KEYS[11]
local refundsKey, chargesKey, walletKey, ledgerKey = KEYS[12], KEYS[13], KEYS[14], KEYS[15]
local jobId, token, guessId, roundId, playerId = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local guess, code, hits, nears, length = ARGV[6], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local finish, eventsCap = ARGV[11], tonumber(ARGV[12])
local prefix, resultTtl, dedupWindow = ARGV[13], tonumber(ARGV[14]), tonumber(ARGV[15])

-- @include "finish"

-- The histogram's upper bounds in ms (codemojex.latency.BUCKETS_MS; a unit test holds the two equal).
local BUCKETS = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000}

local function observe(ms)
  local bucket = 'le_inf'
  for _, bound in ipairs(BUCKETS) do
    if ms <= bound then
      bucket = 'le_' .. bound
      break
    end
  end
  redis.call('HINCRBY', latencyKey, bucket, 1)
  redis.call('HINCRBY', latencyKey, 'count', 1)
  redis.call('HINCRBY', latencyKey, 'sum_ms', ms)
end

local refused = fence(jobKey, statsKey, token)
if refused then return refused end

-- A refunded job pays again before it is scored, or completes unscored (see the header).
local paid = redis.call('HGET', refundsKey, jobId)
if paid == 'refunded' and redis.call('EXISTS', guessKey) == 0 then
  local currency, amount = string.match(redis.call('HGET', chargesKey, jobId), '^([a-z]+)=(%d+)$')
  amount = tonumber(amount)
  paid = 'unpaid'
  if (tonumber(redis.call('HGET', walletKey, currency)) or 0) >= amount then
    paid = 'recharged'
    local t = redis.call('TIME')
    local balance = redis.call('HINCRBY', walletKey, currency, -amount)
    redis.call('RPUSH', ledgerKey, cjson.encode({at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000),
      currency = currency, delta = -amount, balance = balance, reason = 'recharge', job = jobId}))
  end
  redis.call('HSET', refundsKey, jobId, paid)
end
if paid == 'unpaid' then
  if finish ~= '1' then return {2, 0} end
  complete_job(jobKey, activeKey, doneKey, statsKey, jobId, 'unpaid', prefix, resultTtl, dedupWindow)
  return {3, 0}
end

local wrote = 0
if redis.call('EXISTS', guessKey) == 0 then
  wrote = 1
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local submitted = tonumber(redis.call('HGET', jobKey, 'created'))

  -- Fold the guess into the player's standing (codemojex.ranking.fold): frozen once solved.
  local old = redis.call('HGET', standingKey, playerId)
  local solved, bestHits, bestNears, attempts, bestAt = false, -1, -1, 0, 0
  if old then
    solved = string.sub(old, 1, 1) == '0'
    bestHits = 6 - tonumber(string.sub(old, 2, 2))
    bestNears = 6 - tonumber(string.sub(old, 3, 3))
    attempts = tonumber(string.sub(old, 4, 9))
    bestAt = tonumber(string.sub(old, 10, 22))
  end
  local counted = 0
  if not solved then
    counted = 1
    attempts = attempts + 1
    if hits > bestHits or (hits == bestHits and nears > bestNears) then
      bestHits, bestNears, bestAt = hits, nears, submitted
    end
    solved = hits == length
    local flag = 1
    if solved then flag = 0 end
    local member = string.format('%d%d%d%06d%013d:%s', flag, 6 - bestHits, 6 - bestNears,
      math.min(attempts, 999999), bestAt, playerId)
    if old then redis.call('ZREM', boardKey, old) end
    redis.call('ZADD', boardKey, 0, member)
    redis.call('HSET', standingKey, playerId, member)
  end

  local keys = cjson.decode(guess)
  for i = 1, length do
    if string.sub(code, i, i) == 'H' then redis.call('HSET', provenKey, i - 1, keys[i]) end
  end
  local serial = redis.call('ZCARD', scoredKey) + 1
  redis.call('HSET', guessKey, 'serial', serial, 'job', jobId, 'round', roundId, 'player', playerId, 'guess', guess,
    'code', code, 'hits', hits, 'nears', nears, 'submitted', submitted, 'scored', now,
    'attempt', counted * attempts, 'counted', counted)
  redis.call('ZADD', scoredKey, serial, guessId)
  redis.call('XADD', eventsKey, 'MAXLEN', '~', eventsCap, '*', 'kind', 'scored', 'player', playerId,
    'job', jobId, 'guess', guessId, 'code', code, 'solved', tostring(counted == 1 and hits == length))
  observe(math.max(0, now - submitted))
end

if finish == '1' then
  complete_job(jobKey, activeKey, doneKey, statsKey, jobId, guessId .. ' ' .. code, prefix, resultTtl, dedupWindow)
  return {1, wrote}
end
return {2, wrote}
