--[[
  open_round: create a round with its keyboard, secret, prices and times, on the server clock.

  Called by codemojex.rounds.open_round. The id is fresh (minted by the caller), so it names this one
  opening: a second call with the same id changes nothing, so a retried open (after a lost reply, by
  the caller or by redis-py after a timeout) never makes two rounds nor moves the first one's times;
  it answers 1 with the first call's open time when it asks for the same round (keyboard, length,
  prices, guess limit, secret, duration, and the opening instant when it names one), else 0.

  Input:
    KEYS[1] round   (hash)    cmx:{t}:round:<RND>
    KEYS[2] secret  (string)  cmxs:{t}:secret:<RND> (outside cmx:{t}:, see codemojex.access)
    KEYS[3] rounds  (zset)    every round id by open time
    KEYS[4] live    (zset)    rounds not concluded yet, by open time (conclude_round.lua removes it)

    ARGV[1] round id
    ARGV[2] keyboard (JSON list of keys, validated by the caller)
    ARGV[3] length (int, keys in the code)
    ARGV[4] prices ('ticket=1;coin=5', in order of preference)
    ARGV[5] delay (ms from now until the round opens; 0 = now)
    ARGV[6] duration (ms the round stays open; 0 = until closed)
    ARGV[7] max guesses per player (0 = no limit)
    ARGV[8] secret (JSON list of `length` keys of the keyboard)
    ARGV[9] opens at (ms on the server clock; optional, 0 or absent = now + delay): a round spread
            over partitions (codemojex.spread) opens and closes at the same instant in each of them
    ARGV[10] closed at (ms; optional, 0 or absent = open): a copy of a spread round that its home
            partition closed early is written closed at that instant, in this one step, so no copy
            ever admits a guess after the home's close (codemojex.spread_upkeep.copy_round); a
            round found existing is left as it is

  Output:
    { 1, opens_ms }  created, now or by an earlier call with the same arguments
    { 0, opens_ms }  a round with that id exists with other settings; nothing changed
]]
local roundKey, secretKey, roundsKey, liveKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local roundId, keyboard, length, prices = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local delayMs, durationMs, maxGuesses, secret, opensAt =
  tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], ARGV[8], tonumber(ARGV[9] or '0') or 0
local closedAt = tonumber(ARGV[10] or '0') or 0

local existing = redis.call('HMGET', roundKey, 'opens', 'keyboard', 'length', 'prices', 'max_guesses',
  'closes')
if existing[1] then
  local was, closed = tonumber(existing[1]), tonumber(existing[6] or '0') or 0
  local lasted = 0
  if closed > 0 then lasted = closed - was end
  local same = existing[2] == keyboard and existing[3] == length and existing[4] == prices
    and existing[5] == maxGuesses and redis.call('GET', secretKey) == secret
    and lasted == durationMs and (opensAt == 0 or opensAt == was)
  if same then return {1, was} end
  return {0, tonumber(existing[1])}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local opens = now + delayMs
if opensAt > 0 then opens = opensAt end
local closes = 0
if durationMs > 0 then closes = opens + durationMs end
redis.call('HSET', roundKey, 'keyboard', keyboard, 'length', length, 'prices', prices,
  'created', now, 'opens', opens, 'closes', closes, 'max_guesses', maxGuesses, 'status', 'open')
if closedAt > 0 then redis.call('HSET', roundKey, 'status', 'closed', 'closed', closedAt) end
redis.call('SET', secretKey, secret)
redis.call('ZADD', roundsKey, opens, roundId)
redis.call('ZADD', liveKey, opens, roundId)
return {1, opens}
