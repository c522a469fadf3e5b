--[[
  delete_dead: delete a dead letter for good, leaving its tombstone.

  Called by echomq.dead.delete_dead and echomq.dead.delete_all_dead. Only a dead row that is still
  whole (not a tombstone) is deleted: it leaves the dead set and the row is reduced to its tombstone as
  the trim reduces one (include "trim": bury), keeping its state (dead) and attempts, counted until one
  dedup window after the deletion. So within that window a duplicate admission of the id (a stale
  producer's retry) is still answered duplicate or conflict and never runs the job again, a finish of an
  old claim is still refused, and a retried delete can tell what happened. With a dedup window of 0 no
  tombstone is written, and nothing remembers the id.

  While the slot is being resharded (include "slot") the tombstone stays in the row itself, as the trim
  keeps one then (the shared hash of tombstones may be on the other node).

  Lost reply: the row is a tombstone; the retry finds it and answers 2 (no dead letter left: deleted
  already); nothing changes twice. The same answer for a dead letter trimmed at its dead ttl, or deleted
  by another caller: either way it is gone.

  Input:
    KEYS[1] job   (hash)  the row
    KEYS[2] dead  (zset)  dead-lettered ids by time
    KEYS[3] stats (hash)  counters ('deleted')

    ARGV[1] job id
    ARGV[2] bus prefix, e.g. 'emq:{cm}:'
    ARGV[3] dedup window (ms): how long the tombstone counts after the deletion

  Output:
    { 1, 'dead' }  deleted now: out of the dead set, the row reduced to its tombstone
    { 2, 'dead' }  no dead letter left (its tombstone only: deleted or trimmed before); nothing changed
    { 0, state }   not dead (queued, delayed, active, done, or a done tombstone); nothing changed
    {-1, '' }      no row and no tombstone for that id
]]
local jobKey, deadKey, statsKey = KEYS[1], KEYS[2], KEYS[3]
local jobId, prefix, window = ARGV[1], ARGV[2], tonumber(ARGV[3])

-- @include "trim"
-- @include "events"

local row = redis.call('HMGET', jobKey, unpack(TOMBSTONE_READ))
if not row[4] then  -- no row: a tombstone, or nothing
  local tomb = tombstone_at(jobKey)
  if not tomb then return {-1, ''} end
  if tomb.state == 'dead' then return {2, 'dead'} end
  return {0, tomb.state}
end
local state = state_of(row[3])
if state ~= 'dead' then return {0, state} end
if redis.call('HEXISTS', jobKey, 'T') == 1 then return {2, 'dead'} end  -- a tombstone kept in its row

local now, moving = now_ms(), slot_moving(prefix)
redis.call('ZREM', deadKey, jobId)
bury(jobKey, jobId, prefix, row, now, now + window, moving)
redis.call('HINCRBY', statsKey, 'deleted', 1)
emit(events_cap(statsKey), prefix, 'deleted', jobId, row[4])
return {1, 'dead'}
