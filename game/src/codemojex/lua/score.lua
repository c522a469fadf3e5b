--[[
  score: the score worker's effect and the fenced completion of its job, in one atomic step.

  Called by codemojex.score_worker.handle. Nothing happens unless the job is active under the caller's
  attempts token and, when the caller gives its claim's request id (ARGV[3]), claimed by that request
  (the fence of echomq's include "finish"): a reaped and re-claimed worker, or a claim of the job id's
  earlier life (finished, forgotten and admitted anew, its token restarting), is refused as stale and
  changes no count. An empty request id fences by the token alone. Then the
  effect is idempotent on the job id: the GES record is written only if absent, and only when it is
  written do the counts move (the player's standing on the leaderboard, the counted attempts of their
  records, their proven hits, the round's scored sets, their stats result (KEYS[17]), one event, the
  submit->scored latency histogram).
  A redelivered job that finds its record runs as a no-op and completes.

  The standing is a function of the player's scored records taken in admission order, never of the
  order they are scored in (codemojex.leaderboard.fold_records is the same fold in Python):
  the records are folded in GES id order (the JOB's mint order: a GES takes its JOB's body), each with
  its admission time (the job row's 'w', written by submit.lua, Redis clock) as its time. A record counts as an attempt
  unless a solving record precedes it in that order; it then has attempt 0 and counted 0. The standing's
  best_at is the admission time of the first record, in that order, that reached the best feedback.
  A record whose id follows every scored record of the player (delivery in admission order, the usual
  case) is folded onto the stored standing, O(1); one that arrives after a later-admitted record was
  scored refolds the player's records from the first (O(the player's scored guesses in the round),
  which the round's guess limit bounds) and rewrites 'attempt' and 'counted' of the records it
  renumbers; so does one whose player's stored member is of the rule before solve time ranked first
  (no '@'; see codemojex.ranking), whose fields it does not read. The fold reads every key it needs
  before its first write. The same member format as codemojex.ranking.board_member (solved, best
  feedback, best time, attempts) keeps the board in rank order.

  Slot resharding (Redis Cluster): the record a first scoring writes is declared (KEYS[5]) and absent
  until then, so while the slot moves Redis refuses such a call whole (TRYAGAIN / ASK) and the refold
  does not run mid-move. Should it run (every declared key present on one node), the records it would
  read are checked before the first write: one on the other node refuses the call with a TRYAGAIN
  error, nothing changed (a retry scores it once the move ends).

  A job refunded after it was dead-lettered (refund.lua) and then retried is charged again before it is
  scored (ledger reason 'recharge', the same currency and amount, the JOB named) when the wallet can pay;
  when it cannot, the job completes without a record ('unpaid', result 'unpaid'): never refunded and
  scored for free. KEYS[12..15] serve only this rule and the reward below.

  The economy's solve reward (codemojex.economy): the step that writes a record and leaves the player
  solved credits ARGV[17] to their wallet, with one ledger entry 'reward' per currency (naming the
  round), once per (player, round): KEYS[17] holds player -> the JOB whose score took it. Since this
  runs only where the record is written (once per guess) and solved never reverts, the reward is paid
  once, whatever the order or number of deliveries (two solving guesses scored in either order, a
  redelivery, a retried call).

  A round purged by the retention (codemojex.retention: its hash, records, standings and reward markers
  gone) scores nothing: a guess of it delivered that late (a worker that kept the round's rules, a dead
  guess retried) is answered 5 and changes nothing, and the worker dead-letters it. Scored, it would
  fold onto an empty standing, pay the solve reward again (the marker is gone), skip the recharge of a
  refunded guess (the refund marker is gone) and recreate the round's keys, which no later pass purges.
  The retention deletes the round's hash first, so this holds from the first step of a purge.

  Input:
    KEYS[1]  job      (hash)    emq:{t}:job:<JOB>
    KEYS[2]  active   (zset)    claimed ids by lease deadline
    KEYS[3]  done     (zset)    finished ids by finish time
    KEYS[4]  stats    (hash)    queue counters
    KEYS[5]  guess    (hash)    cmx:{t}:guess:<GES>, the record
    KEYS[6]  standing (hash)    player -> leaderboard member
    KEYS[7]  board    (zset)    members at score 0, in rank order
    KEYS[8]  proven   (hash)    position -> key proven a hit
    KEYS[9]  scored   (zset)    the round's GES ids at score 0, so in id order: admission order
    KEYS[10] events   (stream)  the round's live events
    KEYS[11] latency  (hash)    submit->scored histogram: 'le_<ms>' / 'le_inf' -> count, 'count', 'sum_ms'
    KEYS[12] refunds  (hash)    cmx:{t}:refunds:<RND>, JOB -> 'refunded' | 'recharged' | 'unpaid'
    KEYS[13] charges  (hash)    cmx:{t}:charges:<RND>, JOB -> 'currency=amount' charged at submit
    KEYS[14] wallet   (hash)    the player's balances
    KEYS[15] ledger   (list)    the player's append-only ledger
    KEYS[16] played   (zset)    the player's GES ids in the round at score 0: the order their standing folds
    KEYS[17] results  (hash)    cmx:{t}:results:<PLR>, RND -> attempts to solve it, 0 played unsolved (the
                                player's stats, codemojex.player_stats): set with each record written, from
                                the standing just folded, so redeliveries add nothing and any delivery
                                order ends at the admission-order value
    KEYS[18] rewards  (hash)    cmx:{t}:rewards:<RND>, player -> the JOB whose score paid the solve reward
    KEYS[19] round    (hash)    cmx:{t}:round:<RND> (read only: must exist, see above)

    ARGV[1]  job id
    ARGV[2]  attempts token (int) from the claim
    ARGV[3]  request id of the claim call (the row's 'request'), or '' to fence by the token alone
    ARGV[4]  GES id (the job's body under the GES brand)
    ARGV[5]  round id
    ARGV[6]  player id
    ARGV[7]  guess (JSON list of the keys)
    ARGV[8]  feedback code, one letter a position: H hit, N near, - miss
    ARGV[9]  hits
    ARGV[10] nears
    ARGV[11] length of the code (hits == length solves)
    ARGV[12] 1: complete the job too (always, but for the fault hook that splits effect and ack); 0: not
    ARGV[13] events kept in the stream, about
    ARGV[14] bus prefix, e.g. 'emq:{cm}:' (ARGV[14..16]: echomq.core.finish_args, for complete_job,
             which trims a few expired done rows as it completes: see echomq's includes/trim.lua)
    ARGV[15] result ttl (ms): how long a done row is kept whole
    ARGV[16] dedup window (ms): how long after its finish a tombstone absorbs duplicates
    ARGV[17] rounds kept one by one in KEYS[17]; past that the oldest fold into its summary fields
             (played, solved, best, run, best_run, upto: codemojex.player_stats), and a record of a round
             at or before 'upto' leaves it unchanged
    ARGV[18] the solve reward ('coin=25'; '' for none)

  Output:
    { 1, wrote }  scored (wrote = 1) or found already scored (wrote = 0), and the job completed
    { 2, wrote }  the same without the completion (ARGV[12] = 0; the job stays active)
    { 3, 0 }      refunded and the wallet cannot pay again: completed unscored (result 'unpaid')
    { 4, 'done' } already completed under this very claim: a retry whose first reply was lost (that
                  call completed the job); nothing changed
    { 5, 0 }      the round is purged (no hash): nothing changed, the job stays active (to dead-letter)
    { 0, state }  stale: not active under that token and request; nothing changed
    {-1, '' }     no row for that job id
]]
local jobKey, activeKey, doneKey, statsKey, guessKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local standingKey, boardKey, provenKey, scoredKey, eventsKey = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local latencyKey, playedKey, resultsKey = KEYS[11], KEYS[16], KEYS[17]
local refundsKey, chargesKey, walletKey, ledgerKey = KEYS[12], KEYS[13], KEYS[14], KEYS[15]
local jobId, token, request = ARGV[1], ARGV[2], ARGV[3]
local guessId, roundId, playerId = ARGV[4], ARGV[5], ARGV[6]
local guess, code, hits, nears, length = ARGV[7], ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local finish, eventsCap = ARGV[12], tonumber(ARGV[13])
local prefix, resultTtl, dedupWindow = ARGV[14], tonumber(ARGV[15]), tonumber(ARGV[16])
local resultsKept = tonumber(ARGV[17])
local rewardsKey, reward = KEYS[18], ARGV[18]
local roundKey = KEYS[19]

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

-- One step of the fold (codemojex.ranking.fold): the record's (counted, attempt); frozen once solved.
local function fold(s, recordHits, recordNears, at)
  if s.solved then return 0, 0 end
  s.attempts = s.attempts + 1
  if recordHits > s.hits or (recordHits == s.hits and recordNears > s.nears) then
    s.hits, s.nears, s.at = recordHits, recordNears, at
  end
  s.solved = recordHits == length
  return 1, s.attempts
end

-- A member of the rule before solve time ranked first (codemojex.ranking.is_legacy_member): no '@' after
-- the three flag digits, attempts before the time. Its player's standing is refolded from their records.
local function legacy(member)
  return member ~= false and member ~= nil and string.sub(member, 4, 4) ~= '@'
end

-- [play: stats] Byte order of two ids (never Lua's locale-dependent '<'): true if a sorts before b.
local function bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- The player's result in this round (attempts to solve, 0 unsolved), then the oldest kept rounds past
-- resultsKept folded into the summary (the fold of codemojex.streaks.summarize, folded rounds taken as
-- closed). A round at or before 'upto' is folded already: left as it is.
local function record_result(attempts)
  local upto = redis.call('HGET', resultsKey, 'upto')
  if upto and not bytes_before(upto, roundId) then return end
  if attempts > 0 then
    redis.call('HSET', resultsKey, roundId, attempts)
  elseif redis.call('HSETNX', resultsKey, roundId, 0) == 0 then
    return
  end
  local kept = redis.call('HLEN', resultsKey)
  if upto then kept = kept - 6 end
  if kept <= resultsKept then return end
  local all = redis.call('HGETALL', resultsKey)
  local rows = {}
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 3) == 'RND' then rows[#rows + 1] = {all[i], tonumber(all[i + 1])} end
  end
  table.sort(rows, function(x, y) return bytes_before(x[1], y[1]) end)
  local f = redis.call('HMGET', resultsKey, 'played', 'solved', 'best', 'run', 'best_run')
  local played, solved, best = tonumber(f[1]) or 0, tonumber(f[2]) or 0, tonumber(f[3]) or 0
  local run, bestRun = tonumber(f[4]) or 0, tonumber(f[5]) or 0
  for i = 1, #rows - resultsKept do
    local id, took = rows[i][1], rows[i][2]
    played = played + 1
    if took > 0 then
      solved = solved + 1
      if best == 0 or took < best then best = took end
      run = run + 1
      if run > bestRun then bestRun = run end
    else
      run = 0
    end
    redis.call('HDEL', resultsKey, id)
    upto = id
  end
  redis.call('HSET', resultsKey, 'played', played, 'solved', solved, 'best', best, 'run', run,
    'best_run', bestRun, 'upto', upto)
end
-- [end play]

local refused = fence(jobKey, statsKey, token, request)
if refused then return refused end
if redis.call('EXISTS', roundKey) == 0 then return {5, 0} end  -- a purged round (see the header)

-- A record that will refold reads the player's scored records, whose keys it builds (cmx:{t}:guess:<GES>,
-- undeclared). While the slot is being resharded one of them may be on the other node: on the source its
-- read would fail the script, on the target it would read as empty. So each is checked here, before the
-- first write (the recharge below), and the call is refused whole, nothing changed, as Redis refuses a
-- script whose declared keys are split (see echomq's include "slot"); a retry scores it once the move ends.
if slot_moving(prefix) and redis.call('EXISTS', guessKey) == 0 then
  local recordPrefix = string.sub(guessKey, 1, #guessKey - #guessId)  -- cmx:{t}:guess:
  if #redis.call('ZRANGEBYLEX', playedKey, '(' .. guessId, '+') > 0
    or legacy(redis.call('HGET', standingKey, playerId)) then
    for _, id in ipairs(redis.call('ZRANGE', playedKey, 0, -1)) do
      if not here(recordPrefix .. id) then
        return redis.error_reply('TRYAGAIN a guess record of the player is on another node (slot moving)')
      end
    end
  end
end

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
  -- Read everything first: the clock, the admission time, the standing and (out of order) the records.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local submitted = tonumber(redis.call('HGET', jobKey, 'w'))
  local old = redis.call('HGET', standingKey, playerId)
  -- Members compare by bytes in Redis (BYLEX), never by Lua's locale-dependent string order.
  local later = redis.call('ZRANGEBYLEX', playedKey, '(' .. guessId, '+')
  local serial = redis.call('ZCARD', scoredKey) + 1
  local s = {solved = false, hits = -1, nears = -1, attempts = 0, at = 0}
  local counted, attempt
  local renumbered = {}  -- {key, counted, attempt} of records already scored that the refold renumbers
  if #later == 0 and not legacy(old) then
    if old then  -- the stored standing is the fold of every record before this one
      s.solved = string.sub(old, 1, 1) == '0'
      s.hits = 6 - tonumber(string.sub(old, 2, 2))
      s.nears = 6 - tonumber(string.sub(old, 3, 3))
      s.at = tonumber(string.sub(old, 5, 17))
      s.attempts = tonumber(string.sub(old, 18, 23))
    end
    counted, attempt = fold(s, hits, nears, submitted)
  else
    -- Admitted before a record already scored, or a standing of the earlier rule: fold the player's
    -- records again, this one in its place.
    local recordPrefix = string.sub(guessKey, 1, #guessKey - #guessId)  -- cmx:{t}:guess:
    local function rows_of(ids)
      local rows = {}
      for _, id in ipairs(ids) do
        local key = recordPrefix .. id
        rows[#rows + 1] = {key, redis.call('HMGET', key, 'hits', 'nears', 'submitted', 'counted', 'attempt')}
      end
      return rows
    end
    local function refold(rows)
      for _, entry in ipairs(rows) do
        local row = entry[2]
        local c, a = fold(s, tonumber(row[1]), tonumber(row[2]), tonumber(row[3]))
        if tostring(c) ~= row[4] or tostring(a) ~= row[5] then
          renumbered[#renumbered + 1] = {entry[1], c, a}
        end
      end
    end
    local before = rows_of(redis.call('ZRANGEBYLEX', playedKey, '-', '(' .. guessId))
    local after = rows_of(later)
    refold(before)
    counted, attempt = fold(s, hits, nears, submitted)
    refold(after)
  end

  -- Then write: the standing and board, renumbered records, proven hits, the record, the sets, the event.
  local flag = 1
  if s.solved then flag = 0 end
  local member = string.format('%d%d%d@%013d%06d:%s', flag, 6 - s.hits, 6 - s.nears,
    s.at, math.min(s.attempts, 999999), playerId)
  if member ~= old then
    -- Add before removing: the board is never emptied mid-script, which on a slot being resharded
    -- would make the next write to it fail the script halfway (see echomq's include "slot").
    redis.call('ZADD', boardKey, 0, member)
    if old then redis.call('ZREM', boardKey, old) end
    redis.call('HSET', standingKey, playerId, member)
  end
  for _, change in ipairs(renumbered) do
    redis.call('HSET', change[1], 'counted', change[2], 'attempt', change[3])
  end
  local keys = cjson.decode(guess)
  for i = 1, length do
    if string.sub(code, i, i) == 'H' then redis.call('HSET', provenKey, i - 1, keys[i]) end
  end
  redis.call('HSET', guessKey, 'serial', serial, 'job', jobId, 'round', roundId, 'player', playerId, 'guess', guess,
    'code', code, 'hits', hits, 'nears', nears, 'submitted', submitted, 'scored', now,
    'attempt', attempt, 'counted', counted)
  redis.call('ZADD', scoredKey, 0, guessId)
  redis.call('ZADD', playedKey, 0, guessId)
  -- [play: stats and solve notices] The player's result in the round (attempts to solve, 0 unsolved);
  -- 'newly' marks the one record whose scoring turned the standing solved (a notice to everyone watching).
  local newly = '0'
  if s.solved then
    record_result(s.attempts)
    if not (old and string.sub(old, 1, 1) == '0') then newly = '1' end
  else
    record_result(0)
  end
  -- [end play]
  redis.call('XADD', eventsKey, 'MAXLEN', '~', eventsCap, '*', 'kind', 'scored', 'player', playerId,
    'job', jobId, 'guess', guessId, 'code', code, 'solved', tostring(counted == 1 and hits == length),
    'newly', newly, 'attempts', s.attempts)
  observe(math.max(0, now - submitted))
  -- economy: the solve reward (begin) ----------------------------------------------------------------
  if s.solved and reward ~= '' and redis.call('HSETNX', rewardsKey, playerId, jobId) == 1 then
    for name, amount in string.gmatch(reward, '([a-z]+)=(%d+)') do
      local paid = redis.call('HINCRBY', walletKey, name, tonumber(amount))
      redis.call('RPUSH', ledgerKey, cjson.encode({at = now, currency = name, delta = tonumber(amount),
        balance = paid, reason = 'reward', job = '', round = roundId}))
    end
  end
  -- economy: the solve reward (end) ------------------------------------------------------------------
end

if finish == '1' then
  complete_job(jobKey, activeKey, doneKey, statsKey, jobId, guessId .. ' ' .. code, prefix, resultTtl, dedupWindow)
  return {1, wrote}
end
return {2, wrote}
