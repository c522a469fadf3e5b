--[[
  enqueue: admit a job exactly once, keyed by its branded id.

  Called by echomq.jobs.enqueue. One idempotent step: if the row exists the script changes nothing
  and reports duplicate (same lane and payload digest) or conflict (anything else differs). A trimmed
  row keeps its lane and digest as a tombstone, so late duplicates are still absorbed.

  The row (include "row"): lane 'l', max attempts 'm', the payload in chunks of at most 64 bytes
  ('1', '2', ...), priority 'p' only when not 0, state 's' only when delayed (absent: queued); no
  digest (it is the payload's, the first 8 bytes of its sha1, computed when needed) and no admission
  time (the id's mint time). So a small payload's row stays a compact listpack.

  Lost reply: the job is admitted; a retry (same id, lane and payload) is a duplicate and changes
  nothing.

  Input:
    KEYS[1] job     (hash)  the row emq:{t}:job:<JOB>
    KEYS[2] lane    (zset)  the lane's queued ids, score = priority
    KEYS[3] ring    (list)  serviceable lanes
    KEYS[4] delayed (zset)  scheduled ids by due time (ms)
    KEYS[5] wake    (list)  wake-up tokens
    KEYS[6] stats   (hash)  counters
    KEYS[7] waiting (hash)  lane -> the 'claimed' serial since which it waits (fairness lag)

    ARGV[1] job id
    ARGV[2] lane name
    ARGV[3] payload (bytes)
    ARGV[4] max attempts (int >= 1)
    ARGV[5] priority (int; lower is served first, ties by id = mint order)
    ARGV[6] delay (ms; 0 = claimable now)
    ARGV[7] wake cap (max tokens kept in the wake list)

  Output:
    { 1, state }  admitted; state is 'queued' or 'delayed'
    { 0, state }  duplicate; state is the existing row's
    {-1, state }  conflict: same id with another lane or payload; nothing changed
]]
local jobKey, laneKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local jobId, lane, payload = ARGV[1], ARGV[2], ARGV[3]
local maxAttempts, priority, delayMs, wakeCap =
  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

-- @include "admit"

local digest = payload_digest(payload)
local existing = admission_of(jobKey, statsKey, lane, digest)
if existing then return existing end
local reply = admit_new(jobKey, laneKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey,
  jobId, lane, payload, digest, false, maxAttempts, priority, delayMs, wakeCap)
return reply
