--[[
  expire: delete a player who never played, whole, once their trial time is over.

  Called by codemojex.trials.expire_players (the score worker's periodic pass). A player is on trial
  (KEYS[6]) from registration (register.lua) until their first admitted guess (submit.lua removes them
  in the same step as the admission). Both scripts run atomically on one slot, so a guess admitted at
  the same moment as the expiry either comes first (the player is no longer on trial: nothing here
  changes) or after (the player is gone: submit.lua refuses unknown_player and charges nothing). Never
  half a player: the record, wallet, ledger, credits, the token's key, the name's reservation, and the
  players and trial entries go in one step. The caller read the player's token digest and name skeleton
  from the record; if the record names another token now (rotated meanwhile), nothing changes (-2) and
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

    ARGV[1] player id
    ARGV[2] the token digest the caller read from the record, or ''
    ARGV[3] the name skeleton the caller read from the record

  Output:
    { 1 }  deleted
    { 0 }  not on trial (played, or gone already); nothing changed
    {-1 }  on trial, and the trial has not ended yet; nothing changed
    {-2 }  the record names another token than ARGV[3]; nothing changed
]]
local playerKey, walletKey, ledgerKey, creditsKey, playersKey, trialKey, namesKey, tokenKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local playerId, digest, skeleton = ARGV[1], ARGV[2], ARGV[3]

local ends = redis.call('ZSCORE', trialKey, playerId)
if not ends then return {0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(ends) > now then return {-1} end
if (redis.call('HGET', playerKey, 'token') or '') ~= digest then return {-2} end
if digest ~= '' and redis.call('GET', tokenKey) == playerId then redis.call('DEL', tokenKey) end
if redis.call('HGET', namesKey, skeleton) == playerId then redis.call('HDEL', namesKey, skeleton) end
redis.call('DEL', playerKey, walletKey, ledgerKey, creditsKey)
redis.call('ZREM', playersKey, playerId)
redis.call('ZREM', trialKey, playerId)
return {1}
