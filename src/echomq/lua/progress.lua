--[[
  progress: a handler tells how far its job has got, as a 'progress' event (echomq.events).

  Called by echomq.events.progress. Fenced like a finish: only a claim that holds the job (active
  under its token and, when given, its claim call's request id) may tell of it, so a stale worker's
  progress is never published. Nothing is stored on the row; the event goes to the events stream when
  it is on (include "events").

  Lost reply: the retry appends the event again (a progress report is a hint, not a count).

  Input:
    KEYS[1] job   (hash)  the row
    KEYS[2] stats (hash)  counters ('events': the stream's cap when on)

    ARGV[1] job id
    ARGV[2] attempts token (int) from the claim
    ARGV[3] request id of the claim call, or '' to fence by the token alone
    ARGV[4] progress (text)
    ARGV[5] bus prefix, e.g. 'emq:{cm}:'

  Output:
    { 1 }  published
    { 2 }  the events stream is off: nothing published
    { 0 }  the claim no longer holds the job: nothing published
]]
local jobKey, statsKey = KEYS[1], KEYS[2]
local jobId, token, request, text, prefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

-- @include "events"

local row = redis.call('HMGET', jobKey, 's', 'a', 'r', 'l')
if row[1] ~= 'active' or row[2] ~= token or (request ~= '' and row[3] ~= request) then return {0} end
local cap = events_cap(statsKey)
if not cap then return {2} end
emit(cap, prefix, 'progress', jobId, row[4], {'a', token, 'x', text})
return {1}
