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

  The arguments that do not change from one guess to the next come in two newline-separated lists built
  once, one per game (ARGV[1]) and one per round (ARGV[2]), so a call sends 15 values, not 43.

  Lost reply: the job id (ARGV[6]) is minted by the host for this request and has no Idempotency-Key, so
  a client's retry is a new request and a new guess, exactly as with the routes' path (submit without a
  job id); run again with the same arguments (redis-py's own retry) the call is submit.lua's duplicate and
  charges nothing twice (its buckets are charged once more, as admit.lua's retry would).

  Input:
    KEYS[1] address bucket (string) cmx:{t}:bucket:guess:a:<digest>
    KEYS[2] token bucket   (string) cmx:{t}:bucket:guess:p:<digest> (a token with no token key)
    KEYS[3] token key      (string) cmx:{t}:token:<digest> -> the player id
    KEYS[4] job            (hash)   emq:{t}:job:<JOB>
    KEYS[5] round          (hash)   cmx:{t}:round:<RND>
    KEYS[6] guess          (hash)   cmx:{t}:guess:<GES> (read only: reuse check)

    ARGV[1] the game's fields, newline-separated, in this order: the keys tokens (hash, legacy digest ->
            player id), ring, delayed, wake, stats, waiting (submit.lua's KEYS[3..7]) and trial; the key
            prefixes (the player id appended) of the player's lane, player, wallet and ledger; max
            attempts, wake cap, most guesses queued, the allowance's levels ('' for none), the ledger's
            cap (submit.lua's ARGV[4], [5], [6], [9], [10]); the guess class's address bucket capacity and
            period (ms), player bucket capacity (0: none) and period, and the player buckets' prefix
    ARGV[2] the round's fields, newline-separated: its id; the keys quota, charges, standing and
            allowances (submit.lua's KEYS[12], [14], [15], [18]); the key prefixes of the player's
            admitted jobs and of their locks in the round; the round row's keyboard and length as the
            host parsed the guess on them; the request digest's text after the player id
            ('","round":"<RND>","v":1}')
    ARGV[3] job id (minted by the host)
    ARGV[4] the request digest's text before the player id ('{"guess":<as sent>,"player":"')
    ARGV[5] the guess parsed onto the keyboard: a JSON list of its keys
    ARGV[6] the token's SHA-256 (hex), its field in the legacy `tokens` hash

  Output:
    {-9, retry_ms, n}                 rate-limited by bucket n (1 address, 2 player); nothing changed
    {-8}                              the token names no player; nothing changed but the buckets
    {-7}                              the round's keyboard is not the one the host parsed on, or a lock's
                                      key cannot be put in the payload as it is; nothing changed but the
                                      buckets (the host takes the routes' path)
    { 2, player, reply, guess }       the admission: reply is submit.lua's (see its Output), guess the
                                      admitted keys, locks overlaid, as a JSON list; reply is
                                      {-3, 'unknown_round'} when the round has no row (nothing changed but
                                      the buckets)
]]
local addressBucket, tokenBucket, tokenKey, jobKey, roundKey, guessKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local gameFields, roundFields, jobId, digestHead, typed, tokenDigest =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

-- @include "buckets"
-- @include "admit_guess"

local function split(text)
  local fields = {}
  for field in string.gmatch(text .. '\n', '(.-)\n') do fields[#fields + 1] = field end
  return fields
end
local g, r = split(gameFields), split(roundFields)
local tokensKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey, trialKey =
  g[1], g[2], g[3], g[4], g[5], g[6], g[7]
local lanePrefix, playerPrefix, walletPrefix, ledgerPrefix = g[8], g[9], g[10], g[11]
local maxAttempts, wakeCap, maxQueued, allowance, ledgerCap = g[12], g[13], g[14], g[15], g[16]
local addressCapacity, addressPeriod = tonumber(g[17]), tonumber(g[18])
local playerCapacity, playerPeriod, playerBuckets = tonumber(g[19]), tonumber(g[20]), g[21]
local roundId, quotaKey, chargesKey, standingKey, allowancesKey = r[1], r[2], r[3], r[4], r[5]
local submittedPrefix, locksPrefix, keyboard, length, digestTail = r[6], r[7], r[8], r[9], r[10]

-- 1. the buckets
local taken, playerId = take_buckets(addressBucket, tokenBucket, tokenKey, addressCapacity, addressPeriod,
  playerCapacity, playerPeriod, playerBuckets)
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
    playerPrefix .. playerId, walletPrefix .. playerId, ledgerPrefix .. playerId, quotaKey,
    submittedPrefix .. playerId, chargesKey, standingKey, guessKey, trialKey, allowancesKey},
  {jobId, playerId, payload, maxAttempts, wakeCap, maxQueued, digest, roundId, allowance, ledgerCap})
return {2, playerId, reply, guessJson}
