--[[
  credit: add to one balance of a player's wallet, with its ledger entry (prizes, top-ups, refunds).

  Called by codemojex.wallet.credit. Debits happen only in submit.lua, together with an admission, and
  as a refunded guess's recharge in score.lua; a dead guess's refund is refund.lua (once per JOB).

  Input:
    KEYS[1] player (hash)  cmx:{t}:player:<PLR>
    KEYS[2] wallet (hash)  currency -> balance
    KEYS[3] ledger (list)  append-only JSON entries

    ARGV[1] currency (validated by the caller)
    ARGV[2] amount (int >= 1)
    ARGV[3] reason (validated by the caller)
    ARGV[4] JOB id the credit belongs to, or ''

  Output:
    { 1, balance }  credited
    {-1, '' }       no such player; nothing changed
]]
local playerKey, walletKey, ledgerKey = KEYS[1], KEYS[2], KEYS[3]
local currency, amount, reason, jobId = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]

if redis.call('EXISTS', playerKey) == 0 then return {-1, ''} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local balance = redis.call('HINCRBY', walletKey, currency, amount)
redis.call('RPUSH', ledgerKey, cjson.encode({at = now, currency = currency, delta = amount,
  balance = balance, reason = reason, job = jobId}))
return {1, balance}
