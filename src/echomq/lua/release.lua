--[[
  release: hand a claimed job back to its lane at once, fenced by its attempts token and its claim's
  request id.

  Called by echomq.finish.release (graceful shutdown, or a handler that declines the job). The job goes
  back to its lane at its mint position; the try is not counted against max attempts (tries - 1), but
  the attempts token stays, so the releasing worker can never finish it later. The job must be active
  under the caller's token and, when the caller gives its claim's request id (ARGV[3]), claimed by that
  request (the row's 'r'; see complete.lua: a claim of the id's earlier life holds the same token);
  otherwise nothing changes (stale). An empty request id fences by the token alone. The row's fields
  are one letter (include "row"): 's' state (absent: queued), 'a' attempts, 'p' priority, 'l' lane,
  'r' request, 't' tries, 'd' deadline, 'n' ended.

  Lost reply: the job is back in its lane and the row's 'n' (ended) words record the release under the
  token and request id (include "ended"). A retry of the same call finds that word and answers
  { 3, state }: this claim's release landed; nothing changes, nothing is counted. The word names the
  request because a row admitted anew writes its own words under restarted tokens: a call of an
  earlier life's claim finds no word of its request and is stale.

  Input:
    KEYS[1] job    (hash)  the row
    KEYS[2] active (zset)  claimed ids by lease deadline
    KEYS[3] lane   (zset)  the job's lane (must be the row's lane)
    KEYS[4] ring   (list)  serviceable lanes
    KEYS[5] wake   (list)  wake-up tokens
    KEYS[6] stats  (hash)  counters
    KEYS[7] waiting (hash)  lane -> the 'claimed' serial since which it waits (fairness lag)

    ARGV[1] job id
    ARGV[2] attempts token (int) from the claim
    ARGV[3] request id of the claim call (the row's 'request'), or '' to fence by the token alone
    ARGV[4] lane name of the claim
    ARGV[5] wake cap

  Output:
    { 1, 'queued' }  released
    { 3, state }     already released by this very claim (a retry after a lost reply); state is the
                     row's now; nothing changed
    { 0, state }     stale; nothing changed
    {-1, '' }        no row for that id
    {-2, lane }      the claim names another lane than the row's (given); nothing changed
]]
local jobKey, activeKey, laneKey, ringKey, wakeKey, statsKey, waitingKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local jobId, token, request, lane, wakeCap = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])

-- @include "ended"
-- @include "row"
-- @include "gates"

local row = redis.call('HMGET', jobKey, 's', 'a', 'p', 'l', 'r')
if not row[4] then  -- no row: a tombstone is stale (its ended words are gone with the row)
  local tomb = tombstone_at(jobKey)
  if not tomb then return {-1, ''} end
  redis.call('HINCRBY', statsKey, 'stale', 1)
  return {0, tomb.state}
end
local state = row[1] or 'queued'
if row[1] ~= 'active' or row[2] ~= token or (request ~= '' and row[5] ~= request) then
  if ended_as(jobKey, token, request) == 'r' then return {3, state} end
  redis.call('HINCRBY', statsKey, 'stale', 1)
  return {0, state}
end
if row[4] ~= lane then return {-2, row[4]} end

local prefix = job_place(jobKey)
redis.call('ZREM', activeKey, jobId)
redis.call('ZADD', laneKey, tonumber(row[3] or 0), jobId)
if redis.call('ZCARD', laneKey) == 1 then offer_lane(prefix, ringKey, waitingKey, statsKey, lane) end
leave_active(prefix, jobKey, lane, ringKey, waitingKey, statsKey)  -- uncounted from a lane cap
redis.call('HINCRBY', jobKey, 't', -1)
note_ended(jobKey, token, request, 'r')
redis.call('HDEL', jobKey, 's', 'd')  -- 's' absent: queued
if redis.call('LLEN', wakeKey) < wakeCap then redis.call('LPUSH', wakeKey, '1') end
redis.call('HINCRBY', statsKey, 'released', 1)
return {1, 'queued'}
