--[[
  expire: delete a player who never played, whole, once their trial time is over.

  Called by codemojex.trials.expire_players (the score worker's periodic pass). A player is on trial
  (KEYS[6]) from registration (register.lua) until their first admitted guess (submit.lua removes them
  in the same step as the admission). Both scripts run atomically on one slot, so a guess admitted at
  the same moment as the expiry either comes first (the player is no longer on trial: nothing here
  changes) or after (the player is gone: submit.lua refuses unknown_player and charges nothing). Never
  half a player: the record, wallet, ledger, credits, the token's key, the name's reservation, and the
  players and trial entries go in one step, with the recovery code's key and every token of the player's
  sessions (codemojex.recovery; their keys built from KEYS[1]'s prefix: the same hash tag, the same
  slot). The caller read the player's token digest and name skeleton
  (and its recovery code's digest) from the record; if the record names another token (or code) now (rotated meanwhile), nothing changes (-2) and
  the next pass tries again.

  Input:
    KEYS[1] player  (hash)   cmx:{t}:player:<PLR>
    KEYS[2] wallet  (hash)   currency -> balance
    KEYS[3] ledger  (list)   append-only JSON entries
    KEYS[4] credits (hash)   operation id -> the credit it made
    KEYS[5] players (zset)   every player id by registration time
    KEYS[6] trial   (zset)   players with no admitted guess yet, by the time their trial ends
    KEYS[7] names   (hash)   a display name's skeleton -> the player holding it
    KEYS[8] token   (string) cmx:{t}:token:<D>, the player's token (KEYS[1] again when none)
    KEYS[9] sessions (zset)  cmx:{t}:sessions:<PLR>: the player's other tokens -> their end (ms)
    KEYS[10] recovery (string) cmx:{t}:recovery:<Dc>, the player's recovery code (KEYS[1] when none)

    ARGV[1] player id
    ARGV[2] the token digest the caller read from the record, or ''
    ARGV[3] the name skeleton the caller read from the record
    ARGV[4] the recovery code digest the caller read from the record, or ''

  Output:
    { 1 }  deleted
    { 0 }  not on trial (played, or gone already); nothing changed
    {-1 }  on trial, and the trial has not ended yet; nothing changed
    {-2 }  the record names another token than ARGV[2] (or another code than ARGV[4]); nothing changed
]]
local playerKey, walletKey, ledgerKey, creditsKey, playersKey, trialKey, namesKey, tokenKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local sessionsKey, recoveryKey = KEYS[9], KEYS[10]
local playerId, digest, skeleton, code = ARGV[1], ARGV[2], ARGV[3], ARGV[4] or ''

local ends = redis.call('ZSCORE', trialKey, playerId)
if not ends then return {0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(ends) > now then return {-1} end
if (redis.call('HGET', playerKey, 'token') or '') ~= digest then return {-2} end
if (redis.call('HGET', playerKey, 'recovery') or '') ~= code then return {-2} end
if code ~= '' and redis.call('GET', recoveryKey) == playerId then redis.call('DEL', recoveryKey) end
local prefix = string.match(playerKey, '^(.*)player:[^:]+$')
for _, other in ipairs(redis.call('ZRANGE', sessionsKey, 0, -1)) do
  if redis.call('GET', prefix .. 'token:' .. other) == playerId then redis.call('DEL', prefix .. 'token:' .. other) end
end
redis.call('DEL', sessionsKey)
if digest ~= '' and redis.call('GET', tokenKey) == playerId then redis.call('DEL', tokenKey) end
if redis.call('HGET', namesKey, skeleton) == playerId then redis.call('HDEL', namesKey, skeleton) end
redis.call('DEL', playerKey, walletKey, ledgerKey, creditsKey)
redis.call('ZREM', playersKey, playerId)
redis.call('ZREM', trialKey, playerId)
return {1}
