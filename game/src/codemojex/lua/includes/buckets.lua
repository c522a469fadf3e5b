-- take_buckets: admit.lua's rate limit as one function, shared by admit.lua (every request class) and
-- post_guess.lua (the guess class, in the guess's own call). See admit.lua's contract for the buckets
-- (GCRA form, Redis server clock, keys that expire when full again, both checked before either is
-- charged). Returns {1, 0} (a token taken from each bucket used) or {0, retry_ms, n} (refused by bucket n,
-- 1 address, 2 player; nothing changed), and the player id the token key names (nil if none).
local function take_buckets(addressKey, playerKey, tokenKey, addressCapacity, addressPeriod,
                            playerCapacity, playerPeriod, playerPrefix)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

  -- the bucket's next tat if a token fits, else nil and how long until one does
  local function fits(key, capacity, period)
    local tat = tonumber(redis.call('GET', key) or '0')
    if tat < now then tat = now end
    local after = tat + period
    local over = after - now - capacity * period
    if over > 0 then return nil, over end
    return after, 0
  end

  local addressTat, addressWait = nil, 0
  if addressCapacity > 0 then  -- 0: no address bucket (a spread host keeps it in the home partition)
    addressTat, addressWait = fits(addressKey, addressCapacity, addressPeriod)
    if not addressTat then return {0, addressWait, 1}, nil end
  end
  local playerId = nil
  local playerTat = nil
  if playerCapacity > 0 then
    playerId = redis.call('GET', tokenKey)
    if playerId then playerKey = playerPrefix .. playerId end
    local playerWait
    playerTat, playerWait = fits(playerKey, playerCapacity, playerPeriod)
    if not playerTat then return {0, playerWait, 2}, playerId end
  end
  if addressTat then
    redis.call('SET', addressKey, string.format('%d', addressTat), 'PX', addressTat - now)
  end
  if playerTat then
    redis.call('SET', playerKey, string.format('%d', playerTat), 'PX', playerTat - now)
  end
  return {1, 0}, playerId
end
