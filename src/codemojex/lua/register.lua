--[[
  register: create a player with a display name and the starting grant, every credit in the ledger.

  Called by codemojex.players.register. The id is fresh (minted by the caller); a second call with the
  same id changes nothing and answers 0, so a retried registration does not grant twice.

  Input:
    KEYS[1] player  (hash)  cmx:{t}:player:<PLR>
    KEYS[2] wallet  (hash)  currency -> balance
    KEYS[3] ledger  (list)  append-only JSON entries
    KEYS[4] players (zset)  every player id by registration time

    ARGV[1] player id
    ARGV[2] display name (validated by the caller)
    ARGV[3] grant ('ticket=3;coin=50')

  Output:
    { 1, created_ms }  registered and granted
    { 0, created_ms }  that id exists; nothing changed
]]
local playerKey, walletKey, ledgerKey, playersKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local playerId, name, grant = ARGV[1], ARGV[2], ARGV[3]

if redis.call('EXISTS', playerKey) == 1 then
  return {0, tonumber(redis.call('HGET', playerKey, 'created'))}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', playerKey, 'name', name, 'created', now)
redis.call('ZADD', playersKey, now, playerId)
for currency, amount in string.gmatch(grant, '([a-z]+)=(%d+)') do
  local balance = redis.call('HINCRBY', walletKey, currency, tonumber(amount))
  redis.call('RPUSH', ledgerKey, cjson.encode({at = now, currency = currency, delta = tonumber(amount),
    balance = balance, reason = 'grant', job = ''}))
end
return {1, now}
