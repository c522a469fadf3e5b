--[[
  complete: finish a claimed job, fenced by its attempts token.

  Called by echomq.jobs.complete. The job moves active -> done only if it is active and its attempts
  equal the caller's token; otherwise nothing changes and the caller learns it is stale (its lease was
  reaped, and the job returned to its lane or was re-claimed by another worker).

  Input:
    KEYS[1] job    (hash)  the row
    KEYS[2] active (zset)  claimed ids by lease deadline
    KEYS[3] done   (zset)  finished ids by finish time (ms)
    KEYS[4] stats  (hash)  counters

    ARGV[1] job id
    ARGV[2] attempts token (int) from the claim
    ARGV[3] result (bytes, may be empty)

  Output:
    { 1, 'done' }   completed
    { 0, state }    stale: not active, or active under a newer token; nothing changed
    {-1, '' }       no row for that id
]]
local jobKey, activeKey, doneKey, statsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local jobId, token, result = ARGV[1], ARGV[2], ARGV[3]

local row = redis.call('HMGET', jobKey, 'state', 'attempts')
if not row[1] then return {-1, ''} end
if row[1] ~= 'active' or row[2] ~= token then
  redis.call('HINCRBY', statsKey, 'stale', 1)
  return {0, row[1]}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', activeKey, jobId)
redis.call('ZADD', doneKey, now, jobId)
redis.call('HSET', jobKey, 'state', 'done', 'finished', now, 'result', result)
redis.call('HDEL', jobKey, 'deadline')
redis.call('HINCRBY', statsKey, 'completed', 1)
return {1, 'done'}
