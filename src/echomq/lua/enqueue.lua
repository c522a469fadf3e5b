--[[
  enqueue: admit a job exactly once, keyed by its branded id.

  Called by echomq.jobs.enqueue. One idempotent step: if the row exists the script changes nothing
  and reports duplicate (same lane and payload digest) or conflict (anything else differs). A trimmed
  row keeps its lane and digest as a tombstone, so late duplicates are still absorbed.

  Input:
    KEYS[1] job     (hash)  the row emq:{t}:job:<JOB>
    KEYS[2] lane    (zset)  the lane's queued ids, score = priority
    KEYS[3] ring    (list)  serviceable lanes
    KEYS[4] delayed (zset)  scheduled ids by due time (ms)
    KEYS[5] wake    (list)  wake-up tokens
    KEYS[6] stats   (hash)  counters
    KEYS[7] waiting (hash)  lane -> the 'claimed' serial since which it waits (fairness lag)

    ARGV[1] job id
    ARGV[2] lane name
    ARGV[3] payload (bytes)
    ARGV[4] max attempts (int >= 1)
    ARGV[5] priority (int; lower is served first, ties by id = mint order)
    ARGV[6] delay (ms; 0 = claimable now)
    ARGV[7] wake cap (max tokens kept in the wake list)

  Output:
    { 1, state }  admitted; state is 'queued' or 'delayed'
    { 0, state }  duplicate; state is the existing row's
    {-1, state }  conflict: same id with another lane or payload; nothing changed
]]
local jobKey, laneKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local jobId, lane, payload = ARGV[1], ARGV[2], ARGV[3]
local maxAttempts, priority, delayMs, wakeCap =
  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

local digest = redis.sha1hex(payload)
if redis.call('EXISTS', jobKey) == 1 then
  local row = redis.call('HMGET', jobKey, 'state', 'lane', 'digest')
  if row[2] == lane and row[3] == digest then
    redis.call('HINCRBY', statsKey, 'duplicate', 1)
    return {0, row[1]}
  end
  redis.call('HINCRBY', statsKey, 'conflict', 1)
  return {-1, row[1]}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = 'queued'
if delayMs > 0 then state = 'delayed' end

redis.call('HSET', jobKey, 'state', state, 'lane', lane, 'payload', payload, 'digest', digest,
  'attempts', 0, 'tries', 0, 'max', maxAttempts, 'priority', priority, 'created', now)
if delayMs > 0 then
  redis.call('ZADD', delayedKey, now + delayMs, jobId)
else
  redis.call('ZADD', laneKey, priority, jobId)
  if redis.call('ZCARD', laneKey) == 1 then
    redis.call('RPUSH', ringKey, lane)
    redis.call('HSET', waitingKey, lane, redis.call('HGET', statsKey, 'claimed') or 0)
  end
end
-- A token also for a delayed job: an idle worker wakes, learns the new next due time, sleeps again.
if redis.call('LLEN', wakeKey) < wakeCap then redis.call('LPUSH', wakeKey, '1') end
redis.call('HINCRBY', statsKey, 'admitted', 1)
return {1, state}
