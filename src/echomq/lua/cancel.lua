--[[
  cancel: take a queued or delayed job out of the queue for good, before any worker claims it.

  Called by echomq.control.cancel. A queued job leaves its lane (the lane leaves the ring when that
  empties it), a delayed one leaves delayed; either is dead-lettered with the error 'cancelled: <reason>'
  (so it is kept, inspected, retried or deleted as any dead letter, and trimmed to a tombstone after the
  dead ttl that still absorbs a duplicate admission), counted as 'cancelled', and the callers waiting
  for its result wake (include "signal") to learn it was cancelled. An active job is not touched (revoke
  it); a done or dead one neither.

  Lost reply: the job is cancelled; the retry (the same request id) finds its id on the row ('z', kept
  after a retry of the dead job too) and answers 2 (cancelled by this call); nothing changes. Another
  call is refused once the job is dead, whatever its error says.

  While the slot is being resharded, a queued job whose lane is not on this node is left alone (-3).

  Input:
    KEYS[1] job     (hash)  the row
    KEYS[2] delayed (zset)  scheduled ids by due time
    KEYS[3] dead    (zset)  dead-lettered ids by time
    KEYS[4] ring    (list)  serviceable lanes
    KEYS[5] waiting (hash)  lane -> the 'claimed' serial since which it waits
    KEYS[6] stats   (hash)  counters

    ARGV[1] job id
    ARGV[2] bus prefix, e.g. 'emq:{cm}:'
    ARGV[3] reason (text)
    ARGV[4] dead ttl (ms)
    ARGV[5] dedup window (ms)
    ARGV[6] request id (unique to one call, the same on its retries)

  Output:
    { 1, 'dead' }  cancelled now
    { 2, state }   cancelled by this very call before (a retry after a lost reply); nothing changed
    { 0, state }   not queued or delayed (active, done, dead, or a tombstone's state); nothing changed
    {-1, '' }      no row for that id
    {-3, lane }    the slot is being resharded and the lane is not on this node; nothing changed
]]
local jobKey, delayedKey, deadKey, ringKey, waitingKey, statsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local jobId, prefix, reason, deadTtl, dedupWindow = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local request = ARGV[6]

-- @include "trim"
-- @include "signal"
-- @include "events"

local row = redis.call('HMGET', jobKey, 's', 'l', 'z')
if not row[2] then
  local tomb = tombstone_at(jobKey)
  if not tomb then return {-1, ''} end
  return {0, tomb.state}
end
local state = state_of(row[1])
if row[3] == request then return {2, state} end  -- this very call ended it (a retry)
if state ~= 'queued' and state ~= 'delayed' then return {0, state} end

local laneKey = prefix .. 'lane:' .. row[2]
if state == 'queued' and slot_moving(prefix) and not here(laneKey) then return {-3, row[2]} end

local now = now_ms()
if state == 'queued' then
  redis.call('ZREM', laneKey, jobId)
  if redis.call('ZCARD', laneKey) == 0 and redis.call('LREM', ringKey, 1, row[2]) > 0 then
    redis.call('HDEL', waitingKey, row[2])
  end
else
  redis.call('ZREM', delayedKey, jobId)
end
trim_expired(deadKey, statsKey, prefix, now, deadTtl, dedupWindow, TRIM_PER_FINISH)
redis.call('ZADD', deadKey, now, jobId)
redis.call('HSET', jobKey, 's', 'dead', 'f', now, 'e', 'cancelled: ' .. reason, 'z', request)
redis.call('HDEL', jobKey, 'u')
redis.call('HINCRBY', statsKey, 'cancelled', 1)
signal_end(jobKey)
emit(events_cap(statsKey), prefix, 'cancelled', jobId, row[2], {'x', reason})
return {1, 'dead'}
