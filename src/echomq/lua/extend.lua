--[[
  extend: renew a claimed job's lease, fenced by its attempts token.

  Called by echomq.finish.extend (the worker's lease keeper). If the job is still active under the
  caller's token its deadline becomes TIME + lease, even when the old deadline has just passed and no
  sweep has run yet (nobody else can hold it then). If this very claim already completed the job (a
  renewal that lost the race with its own finish) the caller is told 'finished', which is not counted
  as a revocation. Otherwise the lease was reaped: the caller is told 'revoked' and should stop the
  job before any further side effect.

  Input:
    KEYS[1] job    (hash)  the row
    KEYS[2] active (zset)  claimed ids by lease deadline
    KEYS[3] stats  (hash)  counters

    ARGV[1] job id
    ARGV[2] attempts token (int) from the claim
    ARGV[3] lease (ms, > 0)

  Output:
    { 1, deadline }  extended; the new deadline (server ms)
    { 2, 'done' }    finished: done under this very token; nothing changed
    { 0, state }     revoked; nothing changed
    {-1, '' }        no row for that id
]]
local jobKey, activeKey, statsKey = KEYS[1], KEYS[2], KEYS[3]
local jobId, token, leaseMs = ARGV[1], ARGV[2], tonumber(ARGV[3])

local row = redis.call('HMGET', jobKey, 'state', 'attempts')
if not row[1] then return {-1, ''} end
if row[1] == 'done' and row[2] == token then return {2, 'done'} end
if row[1] ~= 'active' or row[2] ~= token then
  redis.call('HINCRBY', statsKey, 'revoked', 1)
  return {0, row[1]}
end
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + leaseMs
redis.call('ZADD', activeKey, deadline, jobId)
redis.call('HSET', jobKey, 'deadline', deadline)
redis.call('HINCRBY', statsKey, 'extended', 1)
return {1, deadline}
