--[[
  credit: add to one balance of a player's wallet, with its ledger entry (prizes, top-ups, refunds),
  once per operation id.

  Called by codemojex.wallet.credit. Debits happen only in submit.lua, together with an admission, and
  as a refunded guess's recharge in score.lua; a dead guess's refund is refund.lua (once per JOB).
  The caller names the credit with an operation id (an OPR id it mints, or gives); the credits hash
  records it with the balance after the credit, in the same step. So a call run twice (a retry after a
  lost reply: redis-py's clients retry a command after a timeout or a dropped connection) credits once
  and answers the second time with the balance the first produced.

  The ledger's bound (lua/includes/ledger.lua): a credit that finds the ledger holding ARGV[6] entries or
  more first keeps its newest half, after one 'carry' entry per currency dropped (replay from zero still
  gives every balance). A call run again answers from the credits hash before this point: no second trim.

  Input:
    KEYS[1] player  (hash)  cmx:{t}:player:<PLR>
    KEYS[2] wallet  (hash)  currency -> balance
    KEYS[3] ledger  (list)  append-only JSON entries
    KEYS[4] credits (hash)  operation id -> 'currency amount balance' of the credit it made

    ARGV[1] currency (validated by the caller)
    ARGV[2] amount (int >= 1)
    ARGV[3] reason (validated by the caller)
    ARGV[4] JOB id the credit belongs to, or ''
    ARGV[5] operation id (validated by the caller)
    ARGV[6] the ledger's cap (GameSettings.ledger_kept, >= 10)

  Output:
    { 1, balance }  credited
    { 2, balance }  this operation credited already; nothing changed; balance is the one it produced
    {-1, '' }       no such player; nothing changed
    {-2, '' }       this operation id made another credit (currency or amount differ); nothing changed
]]
local playerKey, walletKey, ledgerKey, creditsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local currency, amount, reason, jobId, operation = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local ledgerCap = tonumber(ARGV[6])

-- @include "ledger"

if redis.call('EXISTS', playerKey) == 0 then return {-1, ''} end
local done = redis.call('HGET', creditsKey, operation)
if done then
  local doneCurrency, doneAmount, doneBalance = string.match(done, '^(%S+) (%d+) (%-?%d+)$')
  if doneCurrency ~= currency or tonumber(doneAmount) ~= amount then return {-2, ''} end
  return {2, tonumber(doneBalance)}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
bound_ledger(ledgerKey, ledgerCap)
local balance = redis.call('HINCRBY', walletKey, currency, amount)
redis.call('RPUSH', ledgerKey, cjson.encode({at = now, currency = currency, delta = amount,
  balance = balance, reason = reason, job = jobId, op = operation}))
redis.call('HSET', creditsKey, operation, currency .. ' ' .. amount .. ' ' .. balance)
return {1, balance}
