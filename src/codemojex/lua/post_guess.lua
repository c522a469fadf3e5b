--[[
  post_guess: a guess POSTed to the host, in one call: the guess class's rate limits, the bearer token,
  the round's keyboard, the player's locks and the admission, so the player's path is one round trip.

  Called by codemojex.web.guess_path.post_guess (codemojex.web.admission runs it for a plain guess POST:
  no Idempotency-Key, no locks asked, a guess the host already parsed onto the round's keyboard as it
  cached it; anything else takes the routes' path, whose rate limit is admit.lua and admission submit.lua).
  In order, each step answering before any write of its own:
  1. the buckets (lua/includes/buckets.lua, as admit.lua with the guess class's rates): refused, nothing
     changed; the player's bucket is keyed by the player the token key names.
  2. the token: its key (cmx:{t}:token:<digest>), else the legacy `tokens` hash; none is {-8}.
  3. the round's keyboard and length against what the host parsed the guess on (ARGV[8], ARGV[9]): a
     difference is {-7}, nothing changed but the buckets, and the host takes the routes' path (which does
     not charge the buckets again).
  4. the player's locks overlaid on the guess (a lock replaces the key typed at its position, as
     codemojex.codes.parse_guess does), the request digest (SHA-1 of the canonical request as sent, the
     player's id put between ARGV[10] and ARGV[11], as codemojex.guesses.request_digest) and the job's
     payload (codemojex.payload.encode_payload's canonical JSON) built here.
  5. the admission: lua/includes/admit_guess.lua, exactly submit.lua's (see its contract: charge, lane,
     quota, allowance, ledger, trial, refusals).

  Lost reply: the job id (ARGV[6]) is minted by the host for this request and has no Idempotency-Key, so
  a client's retry is a new request and a new guess, exactly as with the routes' path (submit without a
  job id); run again with the same arguments (redis-py's own retry) the call is submit.lua's duplicate and
  charges nothing twice (its buckets are charged once more, as admit.lua's retry would).

  Input:
    KEYS[1]  address bucket (string) cmx:{t}:bucket:guess:a:<digest>
    KEYS[2]  token bucket   (string) cmx:{t}:bucket:guess:p:<digest> (a token with no token key)
    KEYS[3]  token key      (string) cmx:{t}:token:<digest> -> the player id
    KEYS[4]  tokens         (hash)   cmx:{t}:tokens, legacy digest -> player id
    KEYS[5]  job            (hash)   emq:{t}:job:<JOB>
    KEYS[6]  ring           (list)   serviceable lanes
    KEYS[7]  delayed        (zset)   scheduled ids
    KEYS[8]  wake           (list)   wake-up tokens
    KEYS[9]  stats          (hash)   queue counters
    KEYS[10] waiting        (hash)   lane -> claim serial
    KEYS[11] round          (hash)   cmx:{t}:round:<RND>
    KEYS[12] quota          (hash)   player -> guesses admitted in the round
    KEYS[13] charges        (hash)   JOB -> 'currency=amount'
    KEYS[14] standing       (hash)   player -> leaderboard member
    KEYS[15] guess          (hash)   cmx:{t}:guess:<GES> (read only: reuse check)
    KEYS[16] trial          (zset)   players with no admitted guess yet
    KEYS[17] allowances     (hash)   cmx:{t}:allowances:<RND>

    ARGV[1]  the address bucket's capacity (tokens)
    ARGV[2]  the address bucket's period (ms per token)
    ARGV[3]  the player bucket's capacity (tokens; 0: no player bucket)
    ARGV[4]  the player bucket's period (ms per token)
    ARGV[5]  the player bucket's prefix cmx:{t}:bucket:guess:u:
    ARGV[6]  job id (minted by the host)
    ARGV[7]  round id
    ARGV[8]  the round's keyboard field as the host parsed the guess on it
    ARGV[9]  the round's length field, likewise
    ARGV[10] the request digest's text before the player id ('{"guess":<as sent>,"player":"')
    ARGV[11] the request digest's text after it ('","round":"<RND>","v":1}')
    ARGV[12] max attempts of the job
    ARGV[13] wake cap
    ARGV[14] most guesses a player may have queued at once
    ARGV[15] the allowance's levels ('ticket=3;coin=50'; '' for none)
    ARGV[16] the ledger's cap
    ARGV[17] key prefix of the player's lane (emq:{t}:lane:), the player id appended
    ARGV[18] key prefix of the player (cmx:{t}:player:)
    ARGV[19] key prefix of the wallet (cmx:{t}:wallet:)
    ARGV[20] key prefix of the ledger (cmx:{t}:ledger:)
    ARGV[21] key prefix of the player's admitted jobs in the round (cmx:{t}:submitted:<RND>:)
    ARGV[22] key prefix of the player's locks in the round (cmx:{t}:locks:<RND>:)
    ARGV[23] the guess parsed onto the keyboard: a JSON list of its keys
    ARGV[24] the token's SHA-256 (hex), its field in the legacy `tokens` hash

  Output:
    {-9, retry_ms, n}                 rate-limited by bucket n (1 address, 2 player); nothing changed
    {-8}                              the token names no player; nothing changed but the buckets
    {-7}                              the round's keyboard is not the one the host parsed on, or a lock's
                                      key cannot be put in the payload as it is; nothing changed but the
                                      buckets (the host takes the routes' path)
    { 2, player, reply, guess }       the admission: reply is submit.lua's (see its Output), guess the
                                      admitted keys, locks overlaid, as a JSON list
    {-3, 'unknown_round'} inside reply when the round has no row (nothing changed but the buckets)
]]
local addressBucket, tokenBucket, tokenKey, tokensKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local jobKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey = KEYS[5], KEYS[6], KEYS[7], KEYS[8],
  KEYS[9], KEYS[10]
local roundKey, quotaKey, chargesKey, standingKey, guessKey, trialKey, allowancesKey = KEYS[11],
  KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17]
local addressCapacity, addressPeriod = tonumber(ARGV[1]), tonumber(ARGV[2])
local playerCapacity, playerPeriod, playerPrefix = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local jobId, roundId, keyboard, length = ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local digestHead, digestTail = ARGV[10], ARGV[11]
local maxAttempts, wakeCap, maxQueued, allowance, ledgerCap = ARGV[12], ARGV[13], ARGV[14], ARGV[15],
  ARGV[16]
local lanePrefix, playerKeyPrefix, walletPrefix, ledgerPrefix = ARGV[17], ARGV[18], ARGV[19], ARGV[20]
local submittedPrefix, locksPrefix, typed, tokenDigest = ARGV[21], ARGV[22], ARGV[23], ARGV[24]

-- @include "buckets"
-- @include "admit_guess"

-- 1. the buckets
local taken, playerId = take_buckets(addressBucket, tokenBucket, tokenKey, addressCapacity, addressPeriod,
  playerCapacity, playerPeriod, playerPrefix)
if taken[1] == 0 then return {-9, taken[2], taken[3]} end

-- 2. the token
if not playerId then playerId = redis.call('GET', tokenKey) end
if not playerId then playerId = redis.call('HGET', tokensKey, tokenDigest) end
if not playerId then return {-8} end

-- 3. the round's keyboard
local shape = redis.call('HMGET', roundKey, 'keyboard', 'length')
if not shape[1] then return {2, playerId, {-3, 'unknown_round'}, ''} end
if shape[1] ~= keyboard or shape[2] ~= length then return {-7} end

-- 4. locks, digest, payload
local keys = cjson.decode(typed)
local locks = redis.call('HGETALL', locksPrefix .. playerId)
for i = 1, #locks, 2 do
  local position = tonumber(locks[i])
  if position and keys[position + 1] then keys[position + 1] = locks[i + 1] end
end
local quoted = {}
for i, key in ipairs(keys) do
  if string.find(key, '["\\%c]') then return {-7} end  -- would need JSON escapes: the routes' path
  quoted[i] = '"' .. key .. '"'
end
local guessJson = '[' .. table.concat(quoted, ',') .. ']'
local payload = '{"guess":' .. guessJson .. ',"player":"' .. playerId .. '","round":"' .. roundId ..
  '","v":1}'
local digest = redis.sha1hex(digestHead .. playerId .. digestTail)

-- 5. the admission, as submit.lua
local reply = admit_guess(
  {jobKey, lanePrefix .. playerId, ringKey, delayedKey, wakeKey, statsKey, waitingKey, roundKey,
    playerKeyPrefix .. playerId, walletPrefix .. playerId, ledgerPrefix .. playerId, quotaKey,
    submittedPrefix .. playerId, chargesKey, standingKey, guessKey, trialKey, allowancesKey},
  {jobId, playerId, payload, maxAttempts, wakeCap, maxQueued, digest, roundId, allowance, ledgerCap})
return {2, playerId, reply, guessJson}
