--[[
  close_round: close a round now (server clock); after this it admits no guess and reveals its secret.

  Called by codemojex.rounds.close_round. Guesses admitted before the close are still scored.
  The caller names the close with an operation id, kept on the row as 'closed_by'; a call that finds
  the round closed by its own operation (a retry after a lost reply, by the caller or by redis-py
  after a timeout) answers 1 as the first did, and changes nothing.

  Whenever it finds the round closed (by this call or before), it copies the secret to the revealed
  key, once: the web host may read that key, never the secret's own (see codemojex.access).

  Input:
    KEYS[1] round    (hash)    cmx:{t}:round:<RND>
    KEYS[2] secret   (string)  cmxs:{t}:secret:<RND>
    KEYS[3] revealed (string)  cmx:{t}:revealed:<RND>

    ARGV[1] round id (for the reply only)
    ARGV[2] operation id (validated by the caller)
    ARGV[3] reveal ('1', or absent: reveal the secret here; '0': leave it to the caller, which reveals
            once every partition of a spread round is closed: codemojex.spread)

  Output:
    { 1, closed_ms }  closed by this operation (now, or by an earlier run of the same call)
    { 0, closed_ms }  already closed (by another call, or its close time passed); nothing changed
    {-1, id }         no such round
]]
local roundKey, secretKey, revealedKey = KEYS[1], KEYS[2], KEYS[3]
local roundId, operation, revealing = ARGV[1], ARGV[2], ARGV[3] ~= '0'

local function reveal()
  if revealing and redis.call('EXISTS', revealedKey) == 0 then
    local secret = redis.call('GET', secretKey)
    if secret then redis.call('SET', revealedKey, secret) end
  end
end

local row = redis.call('HMGET', roundKey, 'status', 'closes', 'closed', 'closed_by')
if not row[1] then return {-1, roundId} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if row[1] == 'closed' then
  reveal()
  if row[4] == operation then return {1, tonumber(row[3])} end
  return {0, tonumber(row[3])}
end
local closes = tonumber(row[2])
if closes > 0 and closes <= now then
  redis.call('HSET', roundKey, 'status', 'closed', 'closed', closes)
  reveal()
  return {0, closes}
end
redis.call('HSET', roundKey, 'status', 'closed', 'closed', now, 'closed_by', operation)
reveal()
return {1, now}
