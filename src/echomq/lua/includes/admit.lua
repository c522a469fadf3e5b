-- include "admit": the two halves of an idempotent admission (see enqueue.lua for the contract).
-- @include "row"
-- @include "gates"

-- The reply for an id that already has a row (or a tombstone), or nil when it has none.
-- { 0, state } duplicate (same lane and digest); {-1, state } conflict. Counts the outcome.
-- `digest` is the 8-byte admission digest (payload_digest of the payload, or the caller's short_digest):
-- a row that stores none ('g') is an enqueue's whole row, whose digest is its payload's. With no row,
-- the id's tombstone (include "row") answers, while it lasts.
local function admission_of(jobKey, statsKey, lane, digest)
  local row = redis.call('HMGET', jobKey, 's', 'l', 'g', '1')
  local same
  if row[2] then
    local stored = row[3] or payload_digest(read_payload(jobKey, row[4]) or '')
    same = row[2] == lane and stored == digest
  else
    local tomb = tombstone_at(jobKey)
    if not tomb then return nil end
    row[1] = tomb.state
    same = tomb.digest == tomb_digest(lane, digest)
  end
  if same then
    redis.call('HINCRBY', statsKey, 'duplicate', 1)
    return {0, state_of(row[1])}
  end
  redis.call('HINCRBY', statsKey, 'conflict', 1)
  return {-1, state_of(row[1])}
end

-- Write a new row and place the id on its lane (or in delayed); the caller checked admission_of first.
-- `digest` is stored only when `keepDigest` (a digest the payload does not determine, the caller's own).
-- Fields at their default (attempts, tries, priority 0; the state while queued) are left out.
-- Returns { 1, state } with state 'queued' or 'delayed'.
local function admit_new(jobKey, laneKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey,
                         jobId, lane, payload, digest, keepDigest, maxAttempts, priority, delayMs, wakeCap)
  local state = 'queued'
  local fields = {'l', lane, 'm', maxAttempts}
  if delayMs > 0 then
    state = 'delayed'
    fields[#fields + 1], fields[#fields + 2] = 's', state
  end
  if priority ~= 0 then fields[#fields + 1], fields[#fields + 2] = 'p', priority end
  if keepDigest then fields[#fields + 1], fields[#fields + 2] = 'g', digest end
  redis.call('HSET', jobKey, unpack(payload_args(fields, payload)))
  if delayMs > 0 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('ZADD', delayedKey, now + delayMs, jobId)
  else
    redis.call('ZADD', laneKey, priority, jobId)
    if redis.call('ZCARD', laneKey) == 1 then  -- into the ring unless a gate holds it (include "gates")
      offer_lane(job_place(jobKey), ringKey, waitingKey, statsKey, lane)
    end
  end
  -- A token also for a delayed job: an idle worker wakes, learns the new next due time, sleeps again.
  if redis.call('LLEN', wakeKey) < wakeCap then redis.call('LPUSH', wakeKey, '1') end
  redis.call('HINCRBY', statsKey, 'admitted', 1)
  return {1, state}
end
