--[[
  close_round: close a round now (server clock); after this it admits no guess and reveals its secret.

  Called by codemojex.rounds.close_round. Guesses admitted before the close are still scored.

  Input:
    KEYS[1] round (hash)  cmx:{t}:round:<RND>

    ARGV[1] round id (for the reply only)

  Output:
    { 1, closed_ms }  closed now
    { 0, closed_ms }  already closed (by a call, or its close time passed); nothing changed
    {-1, id }         no such round
]]
local roundKey = KEYS[1]
local roundId = ARGV[1]

local row = redis.call('HMGET', roundKey, 'status', 'closes', 'closed')
if not row[1] then return {-1, roundId} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if row[1] == 'closed' then return {0, tonumber(row[3])} end
local closes = tonumber(row[2])
if closes > 0 and closes <= now then
  redis.call('HSET', roundKey, 'status', 'closed', 'closed', closes)
  return {0, closes}
end
redis.call('HSET', roundKey, 'status', 'closed', 'closed', now)
return {1, now}
