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

-- @include "finish"

local refused = fence(jobKey, statsKey, token)
if refused then return refused end
complete_job(jobKey, activeKey, doneKey, statsKey, jobId, result)
return {1, 'done'}
