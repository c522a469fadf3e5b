--[[
  register: create a player with a display name and the starting grant, every credit in the ledger.

  Called by codemojex.players.register. The id is fresh (minted by the caller), so it names this one
  registration: a second call with the same id changes nothing, so a retried registration (after a
  lost reply, by the caller or by redis-py after a timeout) never grants twice; it answers 1 with the
  first call's time when it is the same registration (same name, and the same token digest bound to
  this id), else 0. With a token digest, the player's API token is bound in the same step (no player
  without the token that names it): its own key, expiring after the token lifetime (ARGV[6]), and the
  player's record names it (field 'token'). The name's skeleton (codemojex.names.skeleton: what it
  looks like) is claimed in the same step: a name that looks like another player's registers nobody.
  The new player is on trial (KEYS[7], scored by the time the trial ends: now + ARGV[7]) until their
  first admitted guess (submit.lua); one still on trial then is deleted whole by expire.lua
  (codemojex.trials).

  Input:
    KEYS[1] player  (hash)   cmx:{t}:player:<PLR>
    KEYS[2] wallet  (hash)   currency -> balance
    KEYS[3] ledger  (list)   append-only JSON entries
    KEYS[4] players (zset)   every player id by registration time
    KEYS[5] token   (string) cmx:{t}:token:<D>, the token's key (unused without a digest)
    KEYS[6] names   (hash)   a display name's skeleton -> the player holding it
    KEYS[7] trial   (zset)   players with no admitted guess yet, by the time their trial ends

    ARGV[1] player id
    ARGV[2] display name (validated by the caller)
    ARGV[3] grant ('ticket=3;coin=50')
    ARGV[4] the token's SHA-256 hex digest, or '' for none (validated by the caller)
    ARGV[5] the display name's skeleton (computed by the caller)
    ARGV[6] the token's lifetime (ms)
    ARGV[7] the trial time (ms)

  Output:
    { 1, created_ms }  registered and granted, now or by an earlier call with the same arguments
    { 0, created_ms }  that id names another registration (another name or token); nothing changed
    {-1, '' }          that token digest names a player already; nothing changed
    {-2, '' }          another player holds that skeleton (a name that looks the same); nothing changed
]]
local playerKey, walletKey, ledgerKey, playersKey, tokenKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local namesKey, trialKey = KEYS[6], KEYS[7]
local playerId, name, grant, digest, skeleton = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local lifetime, trialMs = tonumber(ARGV[6]), tonumber(ARGV[7])

local existing = redis.call('HMGET', playerKey, 'name', 'created')
if existing[1] then
  local same = existing[1] == name and (digest == '' or redis.call('GET', tokenKey) == playerId)
  if same then return {1, tonumber(existing[2])} end
  return {0, tonumber(existing[2])}
end
local holder = redis.call('HGET', namesKey, skeleton)
if holder and holder ~= playerId then return {-2, ''} end
if digest ~= '' then
  if not redis.call('SET', tokenKey, playerId, 'NX', 'PX', lifetime) then return {-1, ''} end
end
redis.call('HSET', namesKey, skeleton, playerId)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', playerKey, 'name', name, 'created', now, 'skeleton', skeleton)
if digest ~= '' then redis.call('HSET', playerKey, 'token', digest) end
redis.call('ZADD', playersKey, now, playerId)
redis.call('ZADD', trialKey, now + trialMs, playerId)
for currency, amount in string.gmatch(grant, '([a-z]+)=(%d+)') do
  local balance = redis.call('HINCRBY', walletKey, currency, tonumber(amount))
  redis.call('RPUSH', ledgerKey, cjson.encode({at = now, currency = currency, delta = tonumber(amount),
    balance = balance, reason = 'grant', job = ''}))
end
return {1, now}
