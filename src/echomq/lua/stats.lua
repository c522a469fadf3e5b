--[[
  stats: one consistent snapshot of the counters, the depth of every state, and the ring's lanes.

  Called by echomq.stats.read_stats. Read-only. Queued depth sums every lane in the ring (O(lanes)) and
  every lane a flow gate holds out of it ('<prefix>held', include "gates");
  the first ARGV[2] lanes of the ring are also returned with their depth and fairness lag: the number of
  claims served since the lane was last served, or became non-empty (waiting[lane], see claim.lua).

  Lane keys are built from ARGV[1] (the bus prefix, whose hash tag puts them in the slot). While the
  slot is being resharded (include "slot"), a lane that is not on this node counts as depth 0.

  Input:
    KEYS[1] stats   (hash)  counters
    KEYS[2] ring    (list)  serviceable lanes
    KEYS[3] delayed (zset)
    KEYS[4] active  (zset)
    KEYS[5] done    (zset)
    KEYS[6] dead    (zset)
    KEYS[7] waiting (hash)  lane -> the 'claimed' serial since which it waits

    ARGV[1] bus prefix, e.g. 'emq:{cm}:'
    ARGV[2] how many lanes to detail (int >= 0)

  Output:
    { counters (flat field/value list), queued, delayed, active, done, dead, lanes_total,
      { lane_1, depth_1, lag_1, ... } }
]]
local statsKey, ringKey, delayedKey, activeKey, doneKey, deadKey, waitingKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local prefix, detail = ARGV[1], tonumber(ARGV[2])

-- @include "slot"

local moving = slot_moving(prefix)
local serial = tonumber(redis.call('HGET', statsKey, 'claimed') or '0')
local ring = redis.call('LRANGE', ringKey, 0, -1)
local queued = 0
local lanes = {}
for i, lane in ipairs(ring) do
  local laneKey = prefix .. 'lane:' .. lane
  local depth = 0
  if not moving or here(laneKey) then depth = redis.call('ZCARD', laneKey) end
  queued = queued + depth
  if i <= detail then
    local lag = serial - tonumber(redis.call('HGET', waitingKey, lane) or serial)
    lanes[#lanes + 1] = lane
    lanes[#lanes + 1] = depth
    lanes[#lanes + 1] = lag
  end
end
-- Lanes a gate holds out of the ring (echomq.flow) keep their queued jobs: counted in queued too.
local heldKey = prefix .. 'held'
if not moving or here(heldKey) then
  for _, lane in ipairs(redis.call('SMEMBERS', heldKey)) do
    local laneKey = prefix .. 'lane:' .. lane
    if not moving or here(laneKey) then queued = queued + redis.call('ZCARD', laneKey) end
  end
end
return {
  redis.call('HGETALL', statsKey), queued,
  redis.call('ZCARD', delayedKey), redis.call('ZCARD', activeKey),
  redis.call('ZCARD', doneKey), redis.call('ZCARD', deadKey),
  #ring, lanes
}
