--[[
  lock: lock a position of a player's guesses to the key a scored guess proved a hit there.

  Called by codemojex.locks.lock. Only the score worker writes proven hits, so a player can lock only
  what the authority proved; submit then overlays every locked position onto the guess.

  Input:
    KEYS[1] round  (hash)  cmx:{t}:round:<RND>
    KEYS[2] proven (hash)  position -> key proven a hit
    KEYS[3] locks  (hash)  position -> key locked
    KEYS[4] player (hash)  cmx:{t}:player:<PLR>

    ARGV[1] position (0-based, validated by the caller)

  Output:
    { 1, key }  locked (or already locked) to key
    {-1, '' }   no such round
    {-2, '' }   no scored guess proved that position; nothing changed
    {-3, '' }   the round is closed; nothing changed
    {-4, '' }   no such player
]]
local roundKey, provenKey, locksKey, playerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local position = ARGV[1]

if redis.call('EXISTS', playerKey) == 0 then return {-4, ''} end
local round = redis.call('HMGET', roundKey, 'status', 'closes')
if not round[1] then return {-1, ''} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local closes = tonumber(round[2])
if round[1] == 'closed' or (closes > 0 and now >= closes) then return {-3, ''} end
local key = redis.call('HGET', provenKey, position)
if not key then return {-2, ''} end
redis.call('HSET', locksKey, position, key)
return {1, key}
