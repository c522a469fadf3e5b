--[[
  fail: record a failed attempt, fenced by its attempts token and its claim's request id; retry or
  dead-letter.

  Called by echomq.finish.fail. If the job is active under the caller's token and, when the caller gives
  its claim's request id (ARGV[3]), claimed by that request (the row's 'request'; see complete.lua: a
  claim of the id's earlier life holds the same token): when its tries reached max attempts (or the
  failure is not retryable) it moves to dead with the error; otherwise it goes back to its lane at once
  (delay 0) or to delayed until now + delay (the caller computes the exponential backoff with jitter).
  A stale token, or another claim call's request, changes nothing. The row's fields are one letter
  (include "row"): 's' state (absent: queued), 'a' attempts, 't' tries, 'm' max, 'p' priority, 'l'
  lane, 'r' request, 'd' deadline, 'f' finished, 'e' error, 'n' ended. An empty request id fences by the
  token alone.

  Retention, amortised with the work: a fail that dead-letters first trims up to two dead rows that
  were dead-lettered the dead ttl (ARGV[10]) or more ago to their tombstones (see includes/trim.lua), so
  dead holds the rows within the dead ttl and hardly any more, however fast jobs die. Trimmed rows'
  keys are built from ARGV[9] (the bus prefix, whose hash tag puts them in the slot).

  Lost reply: the job was sent back (or dead-lettered) and the row's 'n' (ended) words record it under the
  token and request id (include "ended"). A retry of the same call finds that word and answers
  { 3, state } or { 4, state }: this claim's fail landed; nothing changes, nothing is counted. The word
  names the request because a row admitted anew writes its own words under restarted tokens: a call of
  an earlier life's claim finds no word of its request and is stale.

  Input:
    KEYS[1] job     (hash)  the row
    KEYS[2] active  (zset)  claimed ids by lease deadline
    KEYS[3] delayed (zset)  scheduled ids by due time (ms)
    KEYS[4] dead    (zset)  dead-lettered ids by time (ms)
    KEYS[5] lane    (zset)  the job's lane (must be the row's lane)
    KEYS[6] ring    (list)  serviceable lanes
    KEYS[7] wake    (list)  wake-up tokens
    KEYS[8] stats   (hash)  counters
    KEYS[9] waiting (hash)  lane -> the 'claimed' serial since which it waits (fairness lag)

    ARGV[1] job id
    ARGV[2] attempts token (int) from the claim
    ARGV[3] request id of the claim call (the row's 'request'), or '' to fence by the token alone
    ARGV[4] error text
    ARGV[5] retry delay (ms, >= 0)
    ARGV[6] retryable (1 or 0)
    ARGV[7] lane name of the claim
    ARGV[8] wake cap
    ARGV[9] bus prefix, e.g. 'emq:{cm}:'
    ARGV[10] dead ttl (ms): how long a dead row is kept whole for inspection and retry
    ARGV[11] dedup window (ms): how long after its finish a tombstone absorbs duplicates

  Output:
    { 1, state }   retrying; state is 'queued' or 'delayed'
    { 2, 'dead' }  dead-lettered
    { 3, state }   already sent back by this very claim's fail (a retry after a lost reply); state is the
                   row's now; nothing changed
    { 4, state }   already dead-lettered by this very claim's fail (likewise); nothing changed
    { 0, state }   stale; nothing changed
    {-1, '' }      no row for that id
    {-2, lane }    the claim names another lane than the row's (given); nothing changed
]]
local jobKey, activeKey, delayedKey, deadKey, laneKey, ringKey, wakeKey, statsKey, waitingKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local jobId, token, request, err = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local delayMs, retryable, lane, wakeCap = tonumber(ARGV[5]), ARGV[6] == '1', ARGV[7], tonumber(ARGV[8])
local prefix, deadTtl, dedupWindow = ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11])

-- @include "trim"
-- @include "gates"
-- @include "signal"

-- @include "ended"

local row = redis.call('HMGET', jobKey, 's', 'a', 't', 'm', 'p', 'l', 'r')
if not row[6] then  -- no row: a tombstone is stale (its ended words are gone with the row)
  local tomb = tombstone_at(jobKey)
  if not tomb then return {-1, ''} end
  redis.call('HINCRBY', statsKey, 'stale', 1)
  return {0, tomb.state}
end
if row[1] ~= 'active' or row[2] ~= token or (request ~= '' and row[7] ~= request) then
  local how = ended_as(jobKey, token, request)
  if how == 'q' then return {3, state_of(row[1])} end
  if how == 'x' then return {4, state_of(row[1])} end
  redis.call('HINCRBY', statsKey, 'stale', 1)
  return {0, state_of(row[1])}
end
if row[6] ~= lane then return {-2, row[6]} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', activeKey, jobId)
redis.call('HDEL', jobKey, 'd')
leave_active(prefix, jobKey, lane, ringKey, waitingKey, statsKey)  -- uncounted from a lane cap

if (not retryable) or tonumber(row[3] or 0) >= tonumber(row[4]) then
  trim_expired(deadKey, statsKey, prefix, now, deadTtl, dedupWindow, TRIM_PER_FINISH)
  redis.call('ZADD', deadKey, now, jobId)
  redis.call('HSET', jobKey, 's', 'dead', 'f', now, 'e', err)
  redis.call('HINCRBY', statsKey, 'dead', 1)
  note_ended(jobKey, token, request, 'x')
  signal_end(jobKey)
  return {2, 'dead'}
end

redis.call('HINCRBY', statsKey, 'retried', 1)
note_ended(jobKey, token, request, 'q')
if delayMs > 0 then
  redis.call('ZADD', delayedKey, now + delayMs, jobId)
  redis.call('HSET', jobKey, 's', 'delayed', 'e', err)
else
  redis.call('ZADD', laneKey, tonumber(row[5] or 0), jobId)
  if redis.call('ZCARD', laneKey) == 1 then offer_lane(prefix, ringKey, waitingKey, statsKey, lane) end
  redis.call('HSET', jobKey, 'e', err)
  redis.call('HDEL', jobKey, 's')  -- absent: queued
end
if redis.call('LLEN', wakeKey) < wakeCap then redis.call('LPUSH', wakeKey, '1') end
if delayMs > 0 then return {1, 'delayed'} end
return {1, 'queued'}
