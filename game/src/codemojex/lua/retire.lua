--[[
  retire: bound a demo player of the proof's demonstration game (codemojex.proof_retention): delete them
  whole when idle, else trim their ledger to its newest entries.

  Called by codemojex.proof_retention._retire when a demo round the player was admitted in is purged,
  on the demo game only (the caller refuses any other tag). The caller passes ARGV[2] = 0 when it found
  the player in a kept round's quota, else the server time at which it listed the kept rounds; this
  script decides "idle" atomically against submit.lua: the player is idle when their newest ledger entry
  is older than ARGV[2], so a guess admitted since the listing (in any round, one opened meanwhile
  included) keeps them. Idle: the record, wallet, ledger, credits, the name's reservation and the players
  and trial entries go in one step, as expire.lua does (the next proof call registers them again, with a
  fresh demo grant). Not idle: the ledger keeps its ARGV[3] newest entries, preceded by one 'carry'
  entry per currency dropped (delta and balance: that currency's balance before the kept entries), so a
  replay from zero still gives every balance (codemojex.wallet.reconcile; lua/includes/ledger.lua).

  Input:
    KEYS[1] player  (hash)   cmx:{t}:player:<PLR>
    KEYS[2] wallet  (hash)   currency -> balance
    KEYS[3] ledger  (list)   JSON entries
    KEYS[4] credits (hash)   operation id -> the credit it made
    KEYS[5] players (zset)   every player id by registration time
    KEYS[6] trial   (zset)   players with no admitted guess yet
    KEYS[7] names   (hash)   a display name's skeleton -> the player holding it

    ARGV[1] player id
    ARGV[2] idle before (server ms): a newest ledger entry older than this is idle
    ARGV[3] ledger entries kept (>= 1) of a player who is not idle

  Output:
    { 1, 0 }  idle: deleted
    { 2, n }  not idle: n ledger entries dropped (0: the ledger was short enough)
    {-1, 0 }  no such player; nothing changed
]]
local playerKey, walletKey, ledgerKey, creditsKey, playersKey, trialKey, namesKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local playerId, idleBefore, kept = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

-- @include "ledger"

if redis.call('EXISTS', playerKey) == 0 then return {-1, 0} end
local newest = redis.call('LINDEX', ledgerKey, -1)
local at = 0
if newest then at = tonumber(cjson.decode(newest).at) or 0 end
if at < idleBefore then
  local skeleton = redis.call('HGET', playerKey, 'skeleton')
  if skeleton and redis.call('HGET', namesKey, skeleton) == playerId then redis.call('HDEL', namesKey, skeleton) end
  redis.call('DEL', playerKey, walletKey, ledgerKey, creditsKey)
  redis.call('ZREM', playersKey, playerId)
  redis.call('ZREM', trialKey, playerId)
  return {1, 0}
end

return {2, carry_ledger(ledgerKey, kept)}
