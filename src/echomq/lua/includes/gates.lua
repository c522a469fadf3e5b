-- include "gates": flow control, the gates a lane passes before the ring serves it (echomq.flow).
--
-- The bus's flow settings are the hash '<prefix>flow', written only by flow.lua:
--   paused            '1': the whole bus is paused (claims take nothing)
--   paused:<lane>     '1': that lane is paused
--   cap:<lane>        k: at most k jobs of that lane active at once ('cap:*': every lane without its own)
--   rate:<lane>       'n:ms': at most n claims of that lane in any ms window ('rate:*': every lane
--                     without its own)
--   rate              'n:ms': at most n claims of the whole bus in any ms window
-- and the stats hash's counter 'flow_gates' is the number of those fields (absent: none), so a bus
-- without flow control pays one field of a hash every script already reads, and nothing more.
--
-- State kept for the gates:
--   '<prefix>held'          set   lanes a gate took out of the ring (or kept out): a lane is in the
--                                 ring iff it has queued jobs and is not held
--   '<prefix>lane-active'   hash  lane -> its jobs active now, kept for capped lanes only: a claim from a
--                                 capped lane marks the row 'K' and counts it; whatever takes a 'K' row
--                                 out of active (complete, fail, release, sweep, revoke) uncounts it
--   '<prefix>throttled'     zset  lane -> when (server ms) its rate window frees a claim again
--   '<prefix>rate:<lane>'   zset  the lane's claims in its window (member 'id:token', score: ms)
--   '<prefix>rate'          zset  the bus's claims in its window
--
-- The claim enforces every gate at each step (claim.lua); the other scripts only keep a closed lane out
-- of the ring. While the bus's slot is being resharded a gate's key may be on the other node: a script
-- that cannot read it treats the lane as open and lets the claim, which stops at such a step, decide.
-- Needs the "row" include before it (now_ms).

local function gates_on(statsKey)
  return redis.call('HGET', statsKey, 'flow_gates') ~= false
end

-- 'n:ms' -> n, ms (nil for nil)
local function rate_of(text)
  if not text then return nil end
  local count, period = string.match(text, '^(%d+):(%d+)$')
  return tonumber(count), tonumber(period)
end

-- The lane's own settings: paused, cap, rate text (a lane's own before the bus's default).
local function lane_gates(prefix, lane)
  local f = redis.call('HMGET', prefix .. 'flow', 'paused:' .. lane, 'cap:' .. lane, 'cap:*',
    'rate:' .. lane, 'rate:*')
  return f[1] ~= false, tonumber(f[2] or f[3] or ''), f[4] or f[5] or nil
end

local function active_of(prefix, lane)
  return tonumber(redis.call('HGET', prefix .. 'lane-active', lane) or '0')
end

-- Is `lane` open: not paused, under its cap, not throttled? (Every gate read; see the header.)
local function lane_open(prefix, lane)
  local ok, paused, cap, rate = pcall(lane_gates, prefix, lane)
  if not ok then return true end  -- the settings are on the other node while the slot moves
  if paused then return false end
  if cap and active_of(prefix, lane) >= cap then return false end
  if rate and redis.call('ZSCORE', prefix .. 'throttled', lane) then return false end
  return true
end

-- Put `lane` at the ring's end with its fairness lag starting now.
local function ring_push(ringKey, waitingKey, statsKey, lane)
  redis.call('RPUSH', ringKey, lane)
  redis.call('HSET', waitingKey, lane, redis.call('HGET', statsKey, 'claimed') or 0)
end

-- A lane that just got its first queued job: into the ring, unless a gate holds it.
local function offer_lane(prefix, ringKey, waitingKey, statsKey, lane)
  if gates_on(statsKey) then
    local held = redis.pcall('SISMEMBER', prefix .. 'held', lane)
    if held == 1 then return false end
    if held == 0 and not lane_open(prefix, lane) then
      redis.call('SADD', prefix .. 'held', lane)
      return false
    end
  end
  ring_push(ringKey, waitingKey, statsKey, lane)
  return true
end

-- A gate of `lane` may have opened: back into the ring if it is held, open and has queued jobs, with a
-- wake token when none is waiting (the claim it wakes passes the wake-up on while jobs are left).
-- Returns true when it went back.
local function reopen_lane(prefix, ringKey, waitingKey, statsKey, lane)
  if not lane_open(prefix, lane) then return false end
  if redis.call('SREM', prefix .. 'held', lane) == 0 then return false end
  if redis.call('ZCARD', prefix .. 'lane:' .. lane) == 0 then return false end
  ring_push(ringKey, waitingKey, statsKey, lane)
  local wakeKey = prefix .. 'wake'
  if redis.call('LLEN', wakeKey) == 0 then redis.call('LPUSH', wakeKey, '1') end
  return true
end

local function uncount(prefix, jobKey, lane, ringKey, waitingKey, statsKey)
  redis.call('HDEL', jobKey, 'K')
  local left = redis.call('HINCRBY', prefix .. 'lane-active', lane, -1)
  if left <= 0 then redis.call('HDEL', prefix .. 'lane-active', lane) end
  return reopen_lane(prefix, ringKey, waitingKey, statsKey, lane)
end

-- A row leaves active: if a capped claim counted it ('K'), uncount it and reopen its lane. `lane` is
-- the row's. Never fails its script: a gate's key on the other node while the slot moves leaves the
-- lane held, for the sweep to reopen (reopen_held). Returns true when the lane went back into the ring.
local function leave_active(prefix, jobKey, lane, ringKey, waitingKey, statsKey)
  if not redis.call('HGET', jobKey, 'K') then return false end
  local ok, back = pcall(uncount, prefix, jobKey, lane, ringKey, waitingKey, statsKey)
  return ok and back
end

-- The sweep's repair: every held lane (at most `limit`) that is open again goes back into the ring.
-- Returns how many went back.
local function reopen_held(prefix, ringKey, waitingKey, statsKey, limit)
  local back = 0
  for _, lane in ipairs(redis.call('SRANDMEMBER', prefix .. 'held', limit)) do
    if reopen_lane(prefix, ringKey, waitingKey, statsKey, lane) then back = back + 1 end
  end
  return back
end

-- Lanes whose rate window freed a claim by `now`: out of throttled, back into the ring when open.
-- Returns how many went back.
local function reopen_due(prefix, now, ringKey, waitingKey, statsKey)
  local due = redis.call('ZRANGEBYSCORE', prefix .. 'throttled', '-inf', now, 'LIMIT', 0, 100)
  local back = 0
  for _, lane in ipairs(due) do
    redis.call('ZREM', prefix .. 'throttled', lane)
    if reopen_lane(prefix, ringKey, waitingKey, statsKey, lane) then back = back + 1 end
  end
  return back
end

-- The earliest time a throttled lane frees a claim, or nil.
local function next_reopen(prefix)
  local first = redis.call('ZRANGE', prefix .. 'throttled', 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return nil
end

-- A rate window `logKey` of n claims per ms: nil when it has room at `now`, else when it frees one.
local function rate_full(logKey, n, ms, now)
  redis.call('ZREMRANGEBYSCORE', logKey, '-inf', now - ms)
  if redis.call('ZCARD', logKey) < n then return nil end
  local oldest = redis.call('ZRANGE', logKey, 0, 0, 'WITHSCORES')
  return tonumber(oldest[2]) + ms
end

-- Count one claim (`member`, unique to the claim) in the window `logKey` of ms.
local function rate_count(logKey, member, ms, now)
  redis.call('ZADD', logKey, now, member)
  redis.call('PEXPIRE', logKey, ms)
end
