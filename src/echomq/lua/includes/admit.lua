-- include "admit": the two halves of an idempotent admission (see enqueue.lua for the contract).

-- The reply for an id that already has a row (or a tombstone), or nil when it has none.
-- { 0, state } duplicate (same lane and payload digest); {-1, state } conflict. Counts the outcome.
local function admission_of(jobKey, statsKey, lane, digest)
  if redis.call('EXISTS', jobKey) == 0 then return nil end
  local row = redis.call('HMGET', jobKey, 'state', 'lane', 'digest')
  if row[2] == lane and row[3] == digest then
    redis.call('HINCRBY', statsKey, 'duplicate', 1)
    return {0, row[1]}
  end
  redis.call('HINCRBY', statsKey, 'conflict', 1)
  return {-1, row[1]}
end

-- Write a new row and place the id on its lane (or in delayed); the caller checked admission_of first.
-- Returns { 1, state } with state 'queued' or 'delayed'.
local function admit_new(jobKey, laneKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey,
                         jobId, lane, payload, digest, maxAttempts, priority, delayMs, wakeCap)
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
end
