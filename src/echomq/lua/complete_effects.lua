--[[
  complete_effects: an application's Redis writes and the fenced completion of its job, in one step.

  Called by echomq.effects.complete. The same fence as complete.lua (include "finish"): nothing
  happens unless the job is active under the caller's attempts token and, when the caller gives its
  claim's request id (ARGV[3]), claimed by that very call. Then every effect is checked against the data
  as it is (include "effects": a key of another type, a counter that is not an integer or would leave
  +-(2^53 - 1), a stream out of ids), with reads only; one that could not apply refuses the whole call
  and nothing changes, the job still active under the claim. Otherwise every effect runs, in program
  order, and the job completes as complete.lua completes it (trimming up to two expired done rows).
  So either the job completes and every effect applies, or nothing does: a stale worker (its lease
  reaped, the job re-claimed), a claim of the job's earlier life, or a job already finished, changes
  no key of the application.

  The effect keys are declared (KEYS[5...]) so a cluster routes the call to their slot, which must be
  the bus's (echomq.effects checks it before sending); none is EchoMQ's (a key under 'emq:' is refused).

  Lost reply: the effects applied and the job is done. A retry of the same call (same id, token and
  request id) finds it done under that very claim and answers { 4, 'done' }: no effect runs again,
  nothing is counted or trimmed (as complete.lua, whose reply codes these are).

  Input:
    KEYS[1] job    (hash)  the row
    KEYS[2] active (zset)  claimed ids by lease deadline
    KEYS[3] done   (zset)  finished ids by finish time (ms)
    KEYS[4] stats  (hash)  counters
    KEYS[5...]     the effects' keys, each once, in the order the program names them (1 = KEYS[5])

    ARGV[1] job id
    ARGV[2] attempts token (int) from the claim
    ARGV[3] request id of the claim call (the row's 'r'), or '' to fence by the token alone
    ARGV[4] result (bytes, may be empty)
    ARGV[5] bus prefix, e.g. 'emq:{cm}:'
    ARGV[6] result ttl (ms): how long a done row is kept whole
    ARGV[7] dedup window (ms): how long after its finish a tombstone absorbs duplicates
    ARGV[8] number of effects (int, >= 0)
    ARGV[9...]     the program: per effect its command, its key's position among KEYS[5...], its
                   argument count, then its arguments (include "effects" lists the commands)

  Output:
    { 1, 'done' }   the effects applied and the job completed
    { 4, 'done' }   already completed under this very claim (a retry after a lost reply); nothing changed
    { 0, state }    stale: not active, or active under a newer token or another claim call; nothing changed
    { 5, reason }   an effect could not apply to the data as it is (reason says which); nothing changed
    {-1, '' }       no row for that id
  A malformed program raises an error before anything is written.
]]
local jobKey, activeKey, doneKey, statsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local jobId, token, request, result = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local prefix, resultTtl, dedupWindow = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local effectCount, keyList, argList = tonumber(ARGV[8]), KEYS, ARGV  -- and their variadic tails

-- @include "finish"
-- @include "effects"

local effects = read_effects(argList, 9, effectCount, keyList, 4)
local refused = fence(jobKey, statsKey, token, request)
if refused then return refused end
local why = check_effects(effects)
if why then return {5, why} end
apply_effects(effects)
complete_job(jobKey, activeKey, doneKey, statsKey, jobId, result, prefix, resultTtl, dedupWindow)
return {1, 'done'}
