-- include "trim": retention of finished rows, amortised with the work that finishes them.
--
-- A finished row (in done or dead) is kept whole for its set's ttl (result ttl, dead ttl), then trimmed:
-- it leaves the set, the row is deleted, and its tombstone (include "row": a field of the shared hash
-- of its mint time, with its state, attempts and an 8-byte digest of its lane and admission digest)
-- counts until one dedup window after its finish (none is written when that is already past), so a late
-- duplicate of the id is still answered duplicate/conflict, and a late retry of its finishing call is
-- answered by the token.
--
-- While the slot is being resharded, the shared hash (a key the script was not given) may be on the
-- other node; the trim then keeps the tombstone in the row itself, as a few fields (state 's', lane
-- 'l', the admission digest 'g', attempts 'a', tries 't', max 'm', finished 'f', the fail/release words
-- 'n', and 'T' = the time of the trim) with the row's expiry at the window's end.
--
-- Who trims: every script that adds a row to done or dead first trims up to TRIM_PER_FINISH expired rows
-- of that set (complete_job of the "finish" include, fail.lua's dead path), and every sweep trims up to
-- its limit of each set, lock or no lock. Each finish adds one row and trims up to two, so trimming
-- outpaces finishing at any throughput: the rows past their ttl never pile up beyond what expired since
-- the last finish (the sweep takes those when the bus goes idle), and memory stays flat.

-- @include "slot"
-- @include "row"

-- Expired rows a finish trims from its set: more than the one row it adds.
local TRIM_PER_FINISH = 2

-- The fields a tombstone kept in its row keeps besides its digest 'g' and 'T' (see above); the
-- shared hash's tombstone takes the state 's' (3rd read), the lane 'l' (4th) and the attempts 'a' (5th).
local TOMBSTONE_KEEPS = {'s', 'l', 'a', 't', 'm', 'f', 'n'}

-- What bury() needs of a row, in this order: HMGET jobKey unpack(TOMBSTONE_READ).
local TOMBSTONE_READ = {'g', '1', unpack(TOMBSTONE_KEEPS)}

-- Reduce the row at `jobKey` (of `jobId`, a row that exists: `row` is its TOMBSTONE_READ fields) to its
-- tombstone, which counts until `expires` (ms; `now` in ms): in the shared hash, the row deleted (none
-- written when `expires` is past), or, while the slot is being resharded (`moving`), in the row itself
-- (see above). Shared by the trim and by delete_dead.lua.
local function bury(jobKey, jobId, prefix, row, now, expires, moving)
  local digest = row[1] or payload_digest(read_payload(jobKey, row[2]) or '')
  if moving then
    local fields = {'T', now, 'g', digest}
    local keep = {T = true, g = true}
    for j, name in ipairs(TOMBSTONE_KEEPS) do
      keep[name] = true
      if row[j + 2] then
        fields[#fields + 1] = name
        fields[#fields + 1] = row[j + 2]
      end
    end
    local drop = {}
    for _, name in ipairs(redis.call('HKEYS', jobKey)) do
      if not keep[name] then drop[#drop + 1] = name end
    end
    if #drop > 0 then redis.call('HDEL', jobKey, unpack(drop)) end
    redis.call('HSET', jobKey, unpack(fields))
    redis.call('PEXPIREAT', jobKey, expires)
  else
    redis.call('DEL', jobKey)
    if expires > now then
      write_tombstone(prefix, jobId, row[3], row[5], tomb_digest(row[4], digest), expires, now)
    end
  end
end

-- Trim up to `count` rows of `setKey` (done or dead) whose finish time is `ttl` ms or more before
-- `now` (ms), oldest first (ties by id); job keys are built from `prefix`. Counts 'trimmed' in
-- `statsKey` and returns how many rows left the set. O(log n + count).
-- A trim never fails the script it rides in: a row whose key this node does not serve (its slot being
-- migrated on a cluster) refuses the first command on it, run by redis.pcall, and that stops the trim
-- there with nothing of that row written.
-- An id whose row is gone leaves the set and writes nothing.
local function trim_expired(setKey, statsKey, prefix, now, ttl, window, count)
  local old = redis.call('ZRANGEBYSCORE', setKey, '-inf', now - ttl, 'WITHSCORES', 'LIMIT', 0, count)
  local trimmed = 0
  local moving = nil  -- asked once, and only when a row is due
  for i = 1, #old, 2 do
    local jobId, finished = old[i], tonumber(old[i + 1])
    local jobKey = prefix .. 'job:' .. jobId
    -- While the slot is being resharded, only a row on this node is trimmed (on the target an absent
    -- row reads as empty though it may still be on the source), in place: a key this script deleted
    -- could not be written again on the source, and the shared hash may be elsewhere (include "slot").
    if moving == nil then moving = slot_moving(prefix) end
    if moving and not here(jobKey) then break end
    local row = redis.pcall('HMGET', jobKey, unpack(TOMBSTONE_READ))
    if type(row) ~= 'table' or row.err then break end  -- not served here: nothing of this row written
    if row[4] then bury(jobKey, jobId, prefix, row, now, finished + window, moving) end  -- it exists
    redis.call('ZREM', setKey, jobId)
    trimmed = trimmed + 1
  end
  if trimmed > 0 then redis.call('HINCRBY', statsKey, 'trimmed', trimmed) end
  return trimmed
end
