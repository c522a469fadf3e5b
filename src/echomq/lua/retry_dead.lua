--[[
  retry_dead: return a dead-lettered job to its lane with a fresh budget of tries.

  Called by echomq.dead.retry_dead and echomq.dead.retry_all_dead. Only a dead job moves; its attempts
  token keeps counting up (so no earlier claim can ever finish it), its tries restart at 0.

  Request id: the row keeps the id of the request that last moved it ('b', retried_by; the row's
  fields are one letter, include "row": 's' state, absent while queued, 'l' lane, 'p' priority, 'T'
  trimmed, 't' tries, 'f' finished). A call with that
  same id never moves the job again, and answers that it moved it: so a call retried after its reply
  was lost tells the truth (moved), and one `retry --all` run retries each dead job at most once, even
  if a worker dead-letters it again before the run ends.

  The lane key is built from ARGV[2] (the bus prefix, whose hash tag puts it in the slot of KEYS) and
  the row's lane, so it cannot be declared. It is read before the first write: while the slot is being
  resharded (include "slot") and the lane is not on this node (moved, or empty everywhere: this node
  cannot tell which), the job stays dead and the caller is told to try again later.

  Input:
    KEYS[1] job   (hash)  the row
    KEYS[2] dead  (zset)  dead-lettered ids
    KEYS[3] ring  (list)  serviceable lanes
    KEYS[4] wake  (list)  wake-up tokens (one pushed for the job moved, up to the cap)
    KEYS[5] stats (hash)  counters
    KEYS[6] waiting (hash)  lane -> the 'claimed' serial since which it waits (fairness lag)

    ARGV[1] job id
    ARGV[2] bus prefix, e.g. 'emq:{cm}:'
    ARGV[3] wake cap
    ARGV[4] request id (non-empty text, unique to one request)

  Output:
    { 1, 'queued' }  back in its lane
    { 2, state }     this request moved it already (a retried call); nothing changed
    { 0, state }     not dead (or a trimmed dead tombstone, whose payload is gone); nothing changed
    {-1, '' }        no row for that id
    {-3, lane }      the slot is being resharded and the lane is not on this node; nothing changed
]]
local jobKey, deadKey, ringKey, wakeKey, statsKey, waitingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local jobId, prefix, wakeCap, request = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

-- @include "row"
-- @include "gates"

local row = redis.call('HMGET', jobKey, 's', 'l', 'p', 'T', 'b')
if not row[2] then  -- no row: a tombstone has no payload left to retry
  local tomb = tombstone_at(jobKey)
  if not tomb then return {-1, ''} end
  return {0, tomb.state}
end
if row[5] == request then return {2, row[1] or 'queued'} end
if row[1] ~= 'dead' or row[4] then return {0, row[1] or 'queued'} end  -- a trimmed tombstone has no payload left

-- @include "slot"

local laneKey = prefix .. 'lane:' .. row[2]
if slot_moving(prefix) and not here(laneKey) then
  redis.call('HINCRBY', statsKey, 'slot_moving', 1)
  return {-3, row[2]}
end
redis.call('ZREM', deadKey, jobId)
redis.call('ZADD', laneKey, tonumber(row[3] or 0), jobId)
if redis.call('ZCARD', laneKey) == 1 then offer_lane(prefix, ringKey, waitingKey, statsKey, row[2]) end
redis.call('HSET', jobKey, 'b', request)
redis.call('HDEL', jobKey, 's', 't', 'f')  -- queued ('s' absent), tries 0 ('t' absent)
if redis.call('LLEN', wakeKey) < wakeCap then redis.call('LPUSH', wakeKey, '1') end
redis.call('HINCRBY', statsKey, 'resurrected', 1)
return {1, 'queued'}
