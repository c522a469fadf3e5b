--[[
  extend: renew a claimed job's lease, fenced by its attempts token and its claim's request id.

  Called by echomq.finish.extend (the worker's lease keeper). If the job is still active under the
  caller's token and, when the caller gives its claim's request id (ARGV[3]), claimed by that request
  (the row's 'request'; see complete.lua: a claim of the id's earlier life holds the same token), its
  deadline becomes TIME + lease, even when the old deadline has just passed and no sweep has run yet
  (nobody else can hold it then). If this very claim already completed the job (a renewal that lost
  the race with its own finish) the caller is told 'finished', which is not counted as a revocation
  (a trimmed row's tombstone drops the request: there the token alone tells). Otherwise the lease was
  reaped, or the job is another claim's: the caller is told 'revoked' and should stop the job before
  any further side effect. An empty request id fences by the token alone. The row's fields are one
  letter (include "row"): 's' state (absent: queued), 'a' attempts, 'r' request, 'l' lane, 'd'
  deadline.

  Input:
    KEYS[1] job    (hash)  the row
    KEYS[2] active (zset)  claimed ids by lease deadline
    KEYS[3] stats  (hash)  counters

    ARGV[1] job id
    ARGV[2] attempts token (int) from the claim
    ARGV[3] request id of the claim call (the row's 'request'), or '' to fence by the token alone
    ARGV[4] lease (ms, > 0)

  Output:
    { 1, deadline }  extended; the new deadline (server ms)
    { 2, 'done' }    finished: done under this very claim; nothing changed
    { 0, state }     revoked; nothing changed
    {-1, '' }        no row for that id
]]
local jobKey, activeKey, statsKey = KEYS[1], KEYS[2], KEYS[3]
local jobId, token, request, leaseMs = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])

-- @include "row"

local row = redis.call('HMGET', jobKey, 's', 'a', 'r', 'l')
if not row[4] then  -- no row: its tombstone, if any, judged by the token alone
  local tomb = tombstone_at(jobKey)
  if not tomb then return {-1, ''} end
  row = {tomb.state, tomb.attempts, nil, ''}
end
-- This claim's: under its token and, named, by its request (a tombstone, without 'r': the token).
local ours = row[2] == token and (request == '' or (row[3] or request) == request)
if row[1] == 'done' and ours then return {2, 'done'} end
if row[1] ~= 'active' or not ours then
  redis.call('HINCRBY', statsKey, 'revoked', 1)
  return {0, row[1] or 'queued'}
end
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + leaseMs
redis.call('ZADD', activeKey, deadline, jobId)
redis.call('HSET', jobKey, 'd', deadline)
redis.call('HINCRBY', statsKey, 'extended', 1)
return {1, deadline}
