--[[
  complete: finish a claimed job, fenced by its attempts token.

  Called by echomq.finish.complete. The job moves active -> done only if it is active and its attempts
  equal the caller's token; otherwise nothing changes and the caller learns it is stale (its lease was
  reaped, and the job returned to its lane or was re-claimed by another worker).

  Retention, amortised with the work: before it adds its row to done, a complete trims up to two done
  rows finished the result ttl (ARGV[5]) or more ago to their tombstones (see includes/trim.lua), so
  however fast jobs finish, done holds the rows within the result ttl and hardly any more. A stale
  complete trims nothing.
  Trimmed rows' keys are built from ARGV[4] (the bus prefix, whose hash tag puts them in the slot).

  Lost reply: the job is done. A retry of the same call (same id and token) finds it done under that
  very token and answers { 4, 'done' }: this claim finished it; nothing changes, nothing is counted,
  nothing is trimmed.

  Input:
    KEYS[1] job    (hash)  the row
    KEYS[2] active (zset)  claimed ids by lease deadline
    KEYS[3] done   (zset)  finished ids by finish time (ms)
    KEYS[4] stats  (hash)  counters

    ARGV[1] job id
    ARGV[2] attempts token (int) from the claim
    ARGV[3] result (bytes, may be empty)
    ARGV[4] bus prefix, e.g. 'emq:{cm}:'
    ARGV[5] result ttl (ms): how long a done row is kept whole
    ARGV[6] dedup window (ms): how long after its finish a tombstone absorbs duplicates

  Output:
    { 1, 'done' }   completed
    { 4, 'done' }   already completed under this very token (a retry after a lost reply); nothing changed
    { 0, state }    stale: not active, or active under a newer token; nothing changed
    {-1, '' }       no row for that id
]]
local jobKey, activeKey, doneKey, statsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local jobId, token, result = ARGV[1], ARGV[2], ARGV[3]
local prefix, resultTtl, dedupWindow = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])

-- @include "finish"

local refused = fence(jobKey, statsKey, token)
if refused then return refused end
complete_job(jobKey, activeKey, doneKey, statsKey, jobId, result, prefix, resultTtl, dedupWindow)
return {1, 'done'}
