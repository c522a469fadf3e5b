--[[
  revoke: take an active job from its worker for good.

  Called by echomq.control.revoke. The job leaves active and is dead-lettered with the error
  'revoked: <reason>', counted as 'revocations'; a capped lane's place is freed (include "gates") and the
  callers waiting for its result wake (include "signal"). Its attempts token is left as it is: the
  worker's claim is no longer active, so its complete, fail, extend and release are refused as stale
  (include "finish": fence), and its lease keeper's next renewal, refused, sets the handler's
  job.revoked. A job that is not active is not touched (cancel a queued or delayed one).

  Lost reply: the job is revoked; the retry (the same request id) finds its id on the row ('z') and
  answers 2 (revoked by this call); nothing changes, even if the job was retried from the dead set since.

  Input:
    KEYS[1] job     (hash)  the row
    KEYS[2] active  (zset)  claimed ids by lease deadline
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
    { 1, 'dead' }  revoked now
    { 2, state }   revoked by this very call before (a retry after a lost reply); nothing changed
    { 0, state }   not active; nothing changed
    {-1, '' }      no row for that id
]]
local jobKey, activeKey, deadKey, ringKey, waitingKey, statsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local jobId, prefix, reason, deadTtl, dedupWindow = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local request = ARGV[6]

-- @include "trim"
-- @include "gates"
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
if state ~= 'active' then return {0, state} end

local now = now_ms()
redis.call('ZREM', activeKey, jobId)
redis.call('HDEL', jobKey, 'd')
leave_active(prefix, jobKey, row[2], ringKey, waitingKey, statsKey)
trim_expired(deadKey, statsKey, prefix, now, deadTtl, dedupWindow, TRIM_PER_FINISH)
redis.call('ZADD', deadKey, now, jobId)
redis.call('HSET', jobKey, 's', 'dead', 'f', now, 'e', 'revoked: ' .. reason, 'z', request)
redis.call('HINCRBY', statsKey, 'revocations', 1)
signal_end(jobKey)
emit(events_cap(statsKey), prefix, 'revoked', jobId, row[2], {'x', reason})
return {1, 'dead'}
