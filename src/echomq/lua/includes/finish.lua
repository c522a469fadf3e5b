-- include "finish": the two halves of the fenced completion (see complete.lua for the contract).
-- The row's fields are one letter (include "row", which "trim" brings): 's' state, 'a' attempts, 'r'
-- request, 'l' lane, 'f' finished, 'x' result, 'd' deadline.
-- @include "trim"
-- @include "gates"
-- @include "signal"

-- Is the row's claim the caller's: under `token`, and, when the caller names its claim call (`request`
-- not ''), claimed by that very call? The token alone cannot tell a job's lives apart: an id finished,
-- trimmed, forgotten and admitted anew restarts its attempts, so a claim of its earlier life holds the
-- token its new life's claim holds now; the request id (claim.lua stores it on the row) differs. A row
-- without a request ('r') field (a tombstone: the trim drops it to keep tombstones small) is judged by the
-- token alone; no claim can act on a tombstone, so that only words a retry's answer (see fence).
local function claimed_by(row, token, request)
  return row[2] == token and (request == '' or (row[3] or request) == request)
end

-- nil when the job is active under `token` and claimed by `request` (the caller owns it); else the
-- refusal reply: {-1, ''} no row; { 4, 'done' } already done under this very claim (a retry whose first
-- reply was lost: that claim finished the job; nothing changed, nothing counted); { 0, state } stale
-- (not active, or active under a newer token or another claim call's request), counted as 'stale'.
-- An empty `request` fences by the token alone.
local function fence(jobKey, statsKey, token, request)
  local row = redis.call('HMGET', jobKey, 's', 'a', 'r', 'l')
  if not row[4] then  -- no row: its tombstone, if any, judged by the token alone
    local tomb = tombstone_at(jobKey)
    if not tomb then return {-1, ''} end
    row = {tomb.state, tomb.attempts, nil, ''}
  end
  local ours = claimed_by(row, token, request)
  if row[1] == 'done' and ours then return {4, 'done'} end
  if row[1] ~= 'active' or not ours then
    redis.call('HINCRBY', statsKey, 'stale', 1)
    return {0, state_of(row[1])}
  end
  return nil
end

-- Move a fenced job active -> done with its result. First trims up to TRIM_PER_FINISH done rows
-- finished `resultTtl` ms or more ago to tombstones that expire `dedupWindow` ms after their finish
-- (the "trim" include), so done never grows past the rows that are still within the result ttl.
-- `prefix` is the bus prefix (e.g. 'emq:{cm}:') the trimmed rows' keys are built from.
local function complete_job(jobKey, activeKey, doneKey, statsKey, jobId, result, prefix, resultTtl, dedupWindow)
  assert(prefix and resultTtl and dedupWindow, 'complete_job takes the prefix, result ttl and dedup window last')
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  trim_expired(doneKey, statsKey, prefix, now, resultTtl, dedupWindow, TRIM_PER_FINISH)
  redis.call('ZREM', activeKey, jobId)
  redis.call('ZADD', doneKey, now, jobId)
  redis.call('HSET', jobKey, 's', 'done', 'f', now, 'x', result)
  redis.call('HDEL', jobKey, 'd')
  redis.call('HINCRBY', statsKey, 'completed', 1)
  -- A capped lane's job frees its place (include "gates"); waiters for its result wake ("signal").
  local marks = redis.call('HMGET', jobKey, 'K', 'W', 'l')
  if marks[1] then leave_active(prefix, jobKey, marks[3], prefix .. 'ring', prefix .. 'waiting', statsKey) end
  if marks[2] then signal_end(jobKey) end
end
