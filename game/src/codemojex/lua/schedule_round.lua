--[[
  schedule_round: open the schedule's next round, once per slot, when the schedule's last round closed.

  Called by codemojex.schedule.step (the score worker's upkeep pass, and serve at its start, both users
  that may write a secret). The schedule's state (KEYS[1]) counts the rounds it opened ('slot') and
  names the last one ('round'). The caller reads that state, then asks for slot + 1 with a fresh round
  id: this script opens the round only if the state still says what the caller read and the last round
  is closed (by a call, or by its close time on the server clock). So two workers that read the same
  state open one round between them: the first run advances the slot, the second finds it moved and
  changes nothing. The new round opens `gap` ms after the last one closed (now if that is past) and
  closes `duration` ms after it opens.

  A lost reply: the round may or may not exist. The same call again (same slot, same id: redis-py's own
  retry after a timeout, or codemojex.schedule.step's) finds its own id named by the state and answers
  1 again, nothing changed; a new call (a fresh id, the next pass) reads the state anew, so it never
  opens a second round for a slot.

  Input:
    KEYS[1] schedule (hash)   cmx:{t}:schedule: 'slot' (int), 'round' (the last RND it opened)
    KEYS[2] last     (hash)   cmx:{t}:round:<RND> of the round 'round' names (KEYS[3] when none)
    KEYS[3] round    (hash)   cmx:{t}:round:<RND> of the new round
    KEYS[4] secret   (string) cmxs:{t}:secret:<RND> of the new round
    KEYS[5] rounds   (zset)   every round id by open time
    KEYS[6] live     (zset)   rounds not concluded yet, by open time (conclude_round.lua removes it)

    ARGV[1] the slot the caller read (int, 0 when the schedule opened none yet)
    ARGV[2] new round id
    ARGV[3] keyboard (JSON list of keys, validated by the caller)
    ARGV[4] length (int)
    ARGV[5] prices ('ticket=1;coin=5')
    ARGV[6] duration (ms, >= 1000)
    ARGV[7] gap (ms after the last round's close before the new one opens)
    ARGV[8] max guesses per player (0 = no limit)
    ARGV[9] secret (JSON list of `length` keys of the keyboard)

  Output:
    { 1, round id, opens_ms }  opened the round of this id (now, or by an earlier run of this call)
    { 2, last round id, 0 }    the last round is not closed yet; nothing changed
    { 0, last round id, 0 }    the state moved since the caller read it (another worker); nothing changed
]]
local scheduleKey, lastKey, roundKey, secretKey, roundsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local liveKey = KEYS[6]
local expected, roundId, keyboard, length, prices = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local durationMs, gapMs, maxGuesses, secret = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8], ARGV[9]

-- @include "round_end"

local state = redis.call('HMGET', scheduleKey, 'slot', 'round')
local slot, last = tonumber(state[1]) or 0, state[2]
if last == roundId then
  return {1, roundId, tonumber(redis.call('HGET', roundKey, 'opens')) or 0}
end
if slot ~= expected then return {0, last or '', 0} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local opens = now
if last then
  local row = redis.call('HMGET', lastKey, 'status', 'closes', 'closed')
  if row[1] then  -- a last round purged long ago (no hash) counts as closed
    local ended = round_ended(row, now)
    if not ended then
      return {2, last, 0}
    end
    opens = math.max(now, ended + gapMs)
  end
end

redis.call('HSET', roundKey, 'keyboard', keyboard, 'length', length, 'prices', prices,
  'created', now, 'opens', opens, 'closes', opens + durationMs, 'max_guesses', maxGuesses,
  'status', 'open', 'scheduled', slot + 1)
redis.call('SET', secretKey, secret)
redis.call('ZADD', roundsKey, opens, roundId)
redis.call('ZADD', liveKey, opens, roundId)
redis.call('HSET', scheduleKey, 'slot', slot + 1, 'round', roundId)
return {1, roundId, opens}
