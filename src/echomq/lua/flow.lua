--[[
  flow: change one flow-control setting of the bus (echomq.flow): pause or resume the bus or a lane,
  set or clear a lane's concurrency cap, set or clear a rate limit of a lane or of the bus.

  Called by echomq.flow.run. The settings live in the hash '<prefix>flow' (include "gates" lists its
  fields) and the stats counter 'flow_gates' is kept equal to its number of fields, so the scripts of a
  bus without flow control read one field and no more. Each change also puts right what it affects at
  once, so no gate waits for a claim to notice it:
    pause a lane    it leaves the ring and is held; a queued job stays queued; its active jobs run on
    resume a lane   back into the ring (with a wake token) if it has queued jobs and its other gates
                    are open
    pause the bus   claims take nothing (active jobs run on and finish; the sweep still reclaims)
    resume the bus  wake tokens for the idle workers
    cap             every active row is counted again against the caps now set (each counted row is
                    marked 'K'), and every held lane whose gates are now open goes back into the ring;
                    a lane now over its cap leaves the ring at its next claim step
    rate            the lanes it throttled go back into the ring if open (the claim throttles them
                    again at once if their window is still full)

  Lost reply: every change sets a value, so its retry changes nothing more (a resume pushes wake
  tokens again: at most an empty claim each).

  Input:
    KEYS[1] flow    (hash)  the settings
    KEYS[2] stats   (hash)  counters ('flow_gates')
    KEYS[3] ring    (list)  serviceable lanes
    KEYS[4] waiting (hash)  lane -> the 'claimed' serial since which it waits
    KEYS[5] wake    (list)  wake-up tokens
    KEYS[6] active  (zset)  claimed ids by lease deadline

    ARGV[1] bus prefix, e.g. 'emq:{cm}:'
    ARGV[2] what: 'pause', 'resume', 'cap' or 'rate'
    ARGV[3] whose: a lane name, '*' (every lane without its own: cap and rate), '' (the bus: pause,
            resume and rate)
    ARGV[4] the value: a cap k (int >= 1) or a rate 'n:ms'; '' clears the setting
    ARGV[5] wake cap

  Output:
    { 1, gates }  done; gates is the number of settings now
]]
local flowKey, statsKey, ringKey, waitingKey, wakeKey, activeKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix, what, whose, value, wakeCap = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])

-- @include "row"
-- @include "gates"

local function field(name)
  if whose == '' then return name end
  return name .. ':' .. whose
end

local function set(name)
  if value == '' then redis.call('HDEL', flowKey, name) else redis.call('HSET', flowKey, name, value) end
end

local function wake(n)
  local tokens = math.min(n, wakeCap - redis.call('LLEN', wakeKey))
  for _ = 1, tokens do redis.call('LPUSH', wakeKey, '1') end
end

local function count_gates()
  local gates = redis.call('HLEN', flowKey)
  if gates > 0 then redis.call('HSET', statsKey, 'flow_gates', gates) else redis.call('HDEL', statsKey, 'flow_gates') end
  return gates
end

-- Every held lane whose gates are now open goes back into the ring, in name order (a set's own order
-- is the server's), and as many workers wake.
local function reopen_all()
  local back = 0
  local held = redis.call('SMEMBERS', prefix .. 'held')
  table.sort(held)
  for _, lane in ipairs(held) do
    if reopen_lane(prefix, ringKey, waitingKey, statsKey, lane) then back = back + 1 end
  end
  wake(back)
end

if what == 'pause' then
  redis.call('HSET', flowKey, field('paused'), '1')
  count_gates()
  if whose ~= '' and redis.call('LREM', ringKey, 1, whose) > 0 then redis.call('HDEL', waitingKey, whose) end
  if whose ~= '' then redis.call('SADD', prefix .. 'held', whose) end
elseif what == 'resume' then
  redis.call('HDEL', flowKey, field('paused'))
  count_gates()
  if whose == '' then
    wake(redis.call('LLEN', ringKey))
  elseif reopen_lane(prefix, ringKey, waitingKey, statsKey, whose) then
    wake(1)
  end
elseif what == 'cap' then
  set(field('cap'))
  count_gates()
  -- Count the active rows again against the caps now set.
  redis.call('DEL', prefix .. 'lane-active')
  local capped = {}
  for _, jobId in ipairs(redis.call('ZRANGE', activeKey, 0, -1)) do
    local jobKey = prefix .. 'job:' .. jobId
    local lane = redis.call('HGET', jobKey, 'l')
    if lane then
      if capped[lane] == nil then
        local _, cap = lane_gates(prefix, lane)
        capped[lane] = cap ~= nil
      end
      if capped[lane] then
        redis.call('HSET', jobKey, 'K', 1)
        redis.call('HINCRBY', prefix .. 'lane-active', lane, 1)
      else
        redis.call('HDEL', jobKey, 'K')
      end
    end
  end
  reopen_all()
elseif what == 'rate' then
  set(field('rate'))
  count_gates()
  if whose ~= '' then
    local lanes = {whose}
    if whose == '*' then lanes = redis.call('ZRANGE', prefix .. 'throttled', 0, -1) end
    for _, lane in ipairs(lanes) do redis.call('ZREM', prefix .. 'throttled', lane) end
    reopen_all()
  else
    wake(redis.call('LLEN', ringKey))
  end
else
  return redis.error_reply('flow: unknown change ' .. what)
end
return {1, redis.call('HLEN', flowKey)}
