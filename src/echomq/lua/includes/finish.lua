-- include "finish": the two halves of the fenced completion (see complete.lua for the contract).

-- nil when the job is active under `token` (the caller owns it); else the refusal reply:
-- {-1, ''} no row; { 0, state } stale (not active, or active under a newer token), counted as 'stale'.
local function fence(jobKey, statsKey, token)
  local row = redis.call('HMGET', jobKey, 'state', 'attempts')
  if not row[1] then return {-1, ''} end
  if row[1] ~= 'active' or row[2] ~= token then
    redis.call('HINCRBY', statsKey, 'stale', 1)
    return {0, row[1]}
  end
  return nil
end

-- Move a fenced job active -> done with its result.
local function complete_job(jobKey, activeKey, doneKey, statsKey, jobId, result)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREM', activeKey, jobId)
  redis.call('ZADD', doneKey, now, jobId)
  redis.call('HSET', jobKey, 'state', 'done', 'finished', now, 'result', result)
  redis.call('HDEL', jobKey, 'deadline')
  redis.call('HINCRBY', statsKey, 'completed', 1)
end
