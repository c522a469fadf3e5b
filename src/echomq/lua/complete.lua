--[[
  complete: finish a claimed job, fenced by its attempts token and its claim's request id.

  Called by echomq.finish.complete. The job moves active -> done only if it is active, its attempts
  equal the caller's token and, when the caller gives its claim's request id (ARGV[3]), its row's
  'r' (request) is that id (the row's fields are one letter, include "row"); otherwise nothing changes and the caller learns it is stale (its lease was
  reaped, and the job returned to its lane or was re-claimed by another worker; or the id was finished,
  forgotten and admitted anew, its token restarting, and the caller's claim is of the earlier life). An
  empty request id fences by the token alone.

  Retention, amortised with the work: before it adds its row to done, a complete trims up to two done
  rows finished the result ttl (ARGV[6]) or more ago to their tombstones (see includes/trim.lua), so
  however fast jobs finish, done holds the rows within the result ttl and hardly any more. A stale
  complete trims nothing.
  Trimmed rows' keys are built from ARGV[5] (the bus prefix, whose hash tag puts them in the slot).

  Lost reply: the job is done. A retry of the same call (same id, token and request id) finds it done
  under that very claim and answers { 4, 'done' }: this claim finished it; nothing changes, nothing is
  counted, nothing is trimmed. Once the row is trimmed its tombstone no longer names the request, and
  the retry is recognised by the token alone (a claim of an earlier life can then be told 'done' of
  the new life's finish under its token: nothing changes either way).

  Input:
    KEYS[1] job    (hash)  the row
    KEYS[2] active (zset)  claimed ids by lease deadline
    KEYS[3] done   (zset)  finished ids by finish time (ms)
    KEYS[4] stats  (hash)  counters

    ARGV[1] job id
    ARGV[2] attempts token (int) from the claim
    ARGV[3] request id of the claim call (the row's 'r'), or '' to fence by the token alone
    ARGV[4] result (bytes, may be empty)
    ARGV[5] bus prefix, e.g. 'emq:{cm}:'
    ARGV[6] result ttl (ms): how long a done row is kept whole
    ARGV[7] dedup window (ms): how long after its finish a tombstone absorbs duplicates

  Output:
    { 1, 'done' }   completed
    { 4, 'done' }   already completed under this very claim (a retry after a lost reply); nothing changed
    { 0, state }    stale: not active, or active under a newer token or another claim call; nothing changed
    {-1, '' }       no row for that id
]]
local jobKey, activeKey, doneKey, statsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local jobId, token, request, result = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local prefix, resultTtl, dedupWindow = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])

-- @include "finish"

local refused = fence(jobKey, statsKey, token, request)
if refused then return refused end
complete_job(jobKey, activeKey, doneKey, statsKey, jobId, result, prefix, resultTtl, dedupWindow)
return {1, 'done'}
