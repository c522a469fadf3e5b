-- The ledger's bound (codemojex.wallet): the only place a player's ledger is trimmed.
--
-- carry_ledger(ledgerKey, keep): drop all but the newest `keep` entries of the ledger (a list of JSON
-- entries, oldest first) and put at its head one 'carry' entry per currency dropped whose delta and
-- balance are that currency's balance after its last dropped entry, i.e. before its first kept entry
-- (or the current balance when none is kept); a currency carried at 0 needs none. Replaying the ledger
-- from zero so still gives every entry's balance and the wallet's balances, and only entries whose
-- effect a carry holds are dropped (an older carry among them too). Its `at` is the newest dropped
-- entry's. Returns the number of entries dropped (0: the ledger was short enough, nothing changed).
-- Running it again at once drops nothing (the ledger holds keep + carries <= keep + currencies).
--
-- bound_ledger(ledgerKey, cap): before an append, a ledger holding `cap` entries or more keeps its
-- newest floor(cap / 2) (carry_ledger), so trims are rare (amortized) and the ledger holds fewer than
-- `cap` entries before the caller appends. Returns what carry_ledger returns.
local function carry_ledger(ledgerKey, keep)
  local dropped = redis.call('LLEN', ledgerKey) - keep
  if dropped <= 0 then return 0 end
  local carried, order, lastAt = {}, {}, 0
  local entries = redis.call('LRANGE', ledgerKey, 0, dropped - 1)
  for i = #entries, 1, -1 do
    local entry = cjson.decode(entries[i])
    if i == #entries then lastAt = entry.at end
    if carried[entry.currency] == nil then
      carried[entry.currency] = entry.balance
      order[#order + 1] = entry.currency
    end
  end
  redis.call('LTRIM', ledgerKey, dropped, -1)
  for i = #order, 1, -1 do  -- LPUSH in reverse: the carries head the ledger in the order first met
    local currency = order[i]
    if carried[currency] ~= 0 then
      redis.call('LPUSH', ledgerKey, cjson.encode({at = lastAt, currency = currency, delta = carried[currency],
        balance = carried[currency], reason = 'carry', job = ''}))
    end
  end
  return dropped
end

local function bound_ledger(ledgerKey, cap)
  if redis.call('LLEN', ledgerKey) < cap then return 0 end
  return carry_ledger(ledgerKey, math.floor(cap / 2))
end
