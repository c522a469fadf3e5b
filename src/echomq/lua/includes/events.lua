-- include "events": the bus's lifecycle events, on a capped stream (echomq.events).
--
-- Off unless the stats counter 'events' holds the stream's cap (echomq.events.set_events); then every
-- script that changes a job's state appends one entry per change to '<prefix>events' (XADD MAXLEN ~
-- cap), in the same atomic step as the change, so the stream never tells of a change that did not
-- happen and, within its cap, misses none that did. Fields: 'e' the event (admitted, claimed,
-- completed, retrying, dead, reclaimed, released, cancelled, revoked, resurrected, deleted, progress),
-- 'j' the job, 'l' its lane, 'a' the attempts token when a claim holds it, 'x' an error or progress
-- text, 't' the claim's server time (ms) on 'claimed' (the time its rate windows count it at).
-- An append never fails its script: while the bus's slot moves the stream may be on the other node,
-- and the event is then not written (redis.pcall).

local function events_cap(statsKey)
  return redis.call('HGET', statsKey, 'events')
end

-- Append one event when `cap` (events_cap's answer) is set; `extra` is a flat list of more fields.
local function emit(cap, prefix, event, jobId, lane, extra)
  if not cap then return end
  local args = {'XADD', prefix .. 'events', 'MAXLEN', '~', cap, '*', 'e', event, 'j', jobId, 'l', lane or ''}
  for _, v in ipairs(extra or {}) do args[#args + 1] = v end
  redis.pcall(unpack(args))
end
