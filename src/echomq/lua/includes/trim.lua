-- include "trim": retention of finished rows, amortised with the work that finishes them.
--
-- A finished row (in done or dead) is kept whole for its set's ttl (result ttl, dead ttl), then trimmed:
-- it leaves the set and keeps only its tombstone (state, lane, digest, attempts, tries, max, created,
-- finished, and 'trimmed' = the time of the trim), which expires one dedup window after its finish (at
-- once when that is already past), so a late duplicate of the id is still answered duplicate/conflict.
--
-- Who trims: every script that adds a row to done or dead first trims up to TRIM_PER_FINISH expired rows
-- of that set (complete_job of the "finish" include, fail.lua's dead path), and every sweep trims up to
-- its limit of each set, lock or no lock. Each finish adds one row and trims up to two, so trimming
-- outpaces finishing at any throughput: the rows past their ttl never pile up beyond what expired since
-- the last finish (the sweep takes those when the bus goes idle), and memory stays flat.

-- @include "slot"

-- Expired rows a finish trims from its set: more than the one row it adds.
local TRIM_PER_FINISH = 2

-- Trim up to `count` rows of `setKey` (done or dead) whose finish time is `ttl` ms or more before
-- `now` (ms), oldest first (ties by id); job keys are built from `prefix`. Counts 'trimmed' in
-- `statsKey` and returns how many rows left the set. O(log n + count).
-- A trim never fails the script it rides in: a row whose key this node does not serve (its slot being
-- migrated on a cluster) refuses the first command on it, run by redis.pcall, and that stops the trim
-- there with nothing of that row written.
-- An id whose row is gone leaves the set and writes nothing. The tombstone is written anew rather than
-- left as the row with fields deleted: a row that held a large payload is a hash table in Redis, and
-- stays one after HDEL (about 800 bytes for the few fields left); written anew they are a listpack
-- (about 300 bytes), and tombstones are most of a busy bus's memory (they outlive whole rows).
local function trim_expired(setKey, statsKey, prefix, now, ttl, window, count)
  local old = redis.call('ZRANGEBYSCORE', setKey, '-inf', now - ttl, 'WITHSCORES', 'LIMIT', 0, count)
  local trimmed = 0
  local moving = nil  -- asked once, and only when a row is due
  for i = 1, #old, 2 do
    local jobId, finished = old[i], tonumber(old[i + 1])
    local jobKey = prefix .. 'job:' .. jobId
    -- While the slot is being resharded, only a row on this node is trimmed (on the target an absent
    -- row reads as empty though it may still be on the source), and it is not written anew: a key
    -- this script deleted could not be written again on the source (see include "slot").
    if moving == nil then moving = slot_moving(prefix) end
    if moving and not here(jobKey) then break end
    local dropped = redis.pcall('HDEL', jobKey, 'payload', 'result', 'error', 'owner', 'claimed_at', 'priority',
      'retried_by', 'late', 'request')
    if type(dropped) ~= 'number' then break end  -- not served here: nothing of this row was written
    local kept = redis.call('HGETALL', jobKey)
    if #kept > 0 and moving then
      redis.call('HSET', jobKey, 'trimmed', now)
      redis.call('PEXPIREAT', jobKey, finished + window)
    elseif #kept > 0 then
      redis.call('DEL', jobKey)  -- written anew, the few small fields left take the compact encoding
      redis.call('HSET', jobKey, 'trimmed', now, unpack(kept))
      redis.call('PEXPIREAT', jobKey, finished + window)
    end
    redis.call('ZREM', setKey, jobId)
    trimmed = trimmed + 1
  end
  if trimmed > 0 then redis.call('HINCRBY', statsKey, 'trimmed', trimmed) end
  return trimmed
end
