--[[
  retry_dead: return a dead-lettered job to its lane with a fresh budget of tries.

  Called by echomq.jobs.retry_dead. Only a dead job moves; its attempts token keeps counting up (so no
  earlier claim can ever finish it), its tries restart at 0.

  Lane keys are built from ARGV[2] (the bus prefix, whose hash tag puts them in the slot of KEYS).

  Input:
    KEYS[1] job   (hash)  the row
    KEYS[2] dead  (zset)  dead-lettered ids
    KEYS[3] ring  (list)  serviceable lanes
    KEYS[4] wake  (list)  wake-up tokens
    KEYS[5] stats (hash)  counters
    KEYS[6] waiting (hash)  lane -> the 'claimed' serial since which it waits (fairness lag)

    ARGV[1] job id
    ARGV[2] bus prefix, e.g. 'emq:{cm}:'
    ARGV[3] wake cap

  Output:
    { 1, 'queued' }  back in its lane
    { 0, state }     not dead (or a trimmed dead tombstone, whose payload is gone); nothing changed
    {-1, '' }        no row for that id
]]
local jobKey, deadKey, ringKey, wakeKey, statsKey, waitingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local jobId, prefix, wakeCap = ARGV[1], ARGV[2], tonumber(ARGV[3])

local row = redis.call('HMGET', jobKey, 'state', 'lane', 'priority', 'trimmed')
if not row[1] then return {-1, ''} end
if row[1] ~= 'dead' or row[4] then return {0, row[1]} end  -- a trimmed tombstone has no payload left

local laneKey = prefix .. 'lane:' .. row[2]
redis.call('ZREM', deadKey, jobId)
redis.call('ZADD', laneKey, tonumber(row[3]), jobId)
if redis.call('ZCARD', laneKey) == 1 then
  redis.call('RPUSH', ringKey, row[2])
  redis.call('HSET', waitingKey, row[2], redis.call('HGET', statsKey, 'claimed') or 0)
end
redis.call('HSET', jobKey, 'state', 'queued', 'tries', 0)
redis.call('HDEL', jobKey, 'finished')
if redis.call('LLEN', wakeKey) < wakeCap then redis.call('LPUSH', wakeKey, '1') end
redis.call('HINCRBY', statsKey, 'resurrected', 1)
return {1, 'queued'}
