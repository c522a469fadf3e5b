-- admit_guess: the whole of submit.lua's admission as one function of its KEYS (K) and ARGV (A), shared by
-- submit.lua (codemojex.guesses.submit) and post_guess.lua (the host's one-call guess POST). K and A are
-- laid out as submit.lua's contract says; the reply is submit.lua's.
-- @include "admit"
-- @include "ledger"
local function admit_guess(K, A)
  local jobKey, laneKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey =
    K[1], K[2], K[3], K[4], K[5], K[6], K[7]
  local roundKey, playerKey, walletKey, ledgerKey, quotaKey, submittedKey, chargesKey, standingKey =
    K[8], K[9], K[10], K[11], K[12], K[13], K[14], K[15]
  local jobId, playerId, payload = A[1], A[2], A[3]
  local maxAttempts, wakeCap, maxQueued = tonumber(A[4]), tonumber(A[5]), tonumber(A[6])
  local digest, roundId = A[7], A[8]
  local guessKey, trialKey, allowancesKey = K[16], K[17], K[18]
  local allowance, ledgerCap = A[9], tonumber(A[10])

  local existing = admission_of(jobKey, statsKey, playerId, short_digest(digest))
  if existing then
    if existing[1] == 0 then
      local charge = redis.call('HGET', chargesKey, jobId) or ''
      return {0, existing[2], charge, read_payload(jobKey, redis.call('HGET', jobKey, '1')) or ''}
    end
    return existing
  end
  if redis.call('EXISTS', guessKey) == 1 or redis.call('HEXISTS', chargesKey, jobId) == 1 then
    redis.call('HINCRBY', statsKey, 'conflict', 1)  -- counted as a conflict refusal
    return {-1, 'used'}
  end
  if payload == '' then return {-3, 'bad_guess'} end

  if redis.call('EXISTS', playerKey) == 0 then return {-3, 'unknown_player'} end
  local round = redis.call('HMGET', roundKey, 'status', 'opens', 'closes', 'max_guesses', 'prices')
  if not round[1] then return {-3, 'unknown_round'} end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local closes = tonumber(round[3])
  if round[1] == 'closed' or (closes > 0 and now >= closes) then return {-3, 'round_closed'} end
  if now < tonumber(round[2]) then return {-3, 'round_not_open'} end
  local standing = redis.call('HGET', standingKey, playerId)
  if standing and string.sub(standing, 1, 1) == '0' then return {-3, 'already_solved'} end
  local maxGuesses = tonumber(round[4])
  if maxGuesses > 0 and (tonumber(redis.call('HGET', quotaKey, playerId)) or 0) >= maxGuesses then
    return {-3, 'max_guesses'}
  end
  if redis.call('ZCARD', laneKey) >= maxQueued then return {-3, 'too_many_queued'} end

  -- economy: the round's allowance (begin) ------------------------------------------------------------
  -- topUp: {currency, amount} to credit before the charge (empty once the allowance was taken).
  local topUp, extra = {}, {}
  if allowance ~= '' and redis.call('HEXISTS', allowancesKey, playerId) == 0 then
    for name, level in string.gmatch(allowance, '([a-z]+)=(%d+)') do
      local missing = tonumber(level) - (tonumber(redis.call('HGET', walletKey, name)) or 0)
      if missing > 0 then
        topUp[#topUp + 1] = {name, missing}
        extra[name] = missing
      end
    end
  end
  local function held(name)
    return (tonumber(redis.call('HGET', walletKey, name)) or 0) + (extra[name] or 0)
  end
  -- economy: the round's allowance (end) --------------------------------------------------------------

  local currency, amount
  for name, price in string.gmatch(round[5], '([a-z]+)=(%d+)') do
    if held(name) >= tonumber(price) then
      currency, amount = name, tonumber(price)
      break
    end
  end
  if not currency then return {-3, 'insufficient_funds'} end

  local reply = admit_new(jobKey, laneKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey,
    jobId, playerId, payload, short_digest(digest), true, maxAttempts, 0, 0, wakeCap)
  redis.call('HSET', jobKey, 'w', now)  -- the admission time: the guess's time on the board (score.lua)
  bound_ledger(ledgerKey, ledgerCap)  -- before this admission's entries (allowance, charge) are appended
  -- economy: take the round's allowance (begin) ------------------------------------------------------
  if allowance ~= '' and redis.call('HSETNX', allowancesKey, playerId, jobId) == 1 then
    for _, credit in ipairs(topUp) do
      local topped = redis.call('HINCRBY', walletKey, credit[1], credit[2])
      redis.call('RPUSH', ledgerKey, cjson.encode({at = now, currency = credit[1], delta = credit[2],
        balance = topped, reason = 'allowance', job = '', round = roundId}))
    end
  end
  -- economy: take the round's allowance (end) --------------------------------------------------------
  local balance = redis.call('HINCRBY', walletKey, currency, -amount)
  redis.call('RPUSH', ledgerKey, cjson.encode({at = now, currency = currency, delta = -amount,
    balance = balance, reason = 'guess', job = jobId, round = roundId}))
  redis.call('HINCRBY', quotaKey, playerId, 1)
  redis.call('ZADD', submittedKey, now, jobId)
  local charge = currency .. '=' .. amount
  redis.call('HSET', chargesKey, jobId, charge)
  redis.call('ZREM', trialKey, playerId)
  return {1, reply[2], charge}
end
