--[[
  token: rotate a player's API token (a new one in, the old one out, in one step) or revoke it.

  Called by codemojex.tokens.rotate and codemojex.tokens.revoke. The caller read the player id the old
  token names (KEYS[1], or the legacy hash KEYS[5]; or, for a replayed rotation, KEYS[2]) and passes it;
  the script checks it again, so a change in between refuses the call (-1) and changes nothing.

  rotate: the new token's key is written with the full lifetime, the old token's key (or legacy hash
  field) deleted, the player's record names the new digest, and the old digest's 'rotated' key keeps
  the new digest and the new token sealed under the old token (codemojex.tokens.seal: only a holder of
  the old token can open it) for ARGV[7] ms. A second rotation of the same old token within that time
  (a retry after a lost reply, by the client or by redis-py) answers 0 with that sealed token, as long
  as it is still the player's token (not revoked, not rotated again): the client gets the token the
  first call minted, and the old token stays revoked.
  revoke: the token's key (or legacy field) is deleted and the player's record (or sessions) forgets it.
  A token of the player's sessions (KEYS[6]: tokens a recovery code was traded for, codemojex.recovery)
  is rotated within the sessions (the new digest listed in place of the old one, the record's token
  untouched), and a replay checks that its successor is still the record's token or a session.
  adopt: a legacy token (the tokens hash, from before token keys) moves to its own key with a full
  lifetime from now, and the player's record names it; one whose player is gone is just dropped.

  Input:
    KEYS[1] old      (string) cmx:{t}:token:<D1>, the presented token's key
    KEYS[2] rotated  (string) cmx:{t}:rotated:<D1>: '<PLR> <D2> <expires_ms> <sealed hex>'
    KEYS[3] player   (hash)   cmx:{t}:player:<PLR>, field 'token' = the current digest
    KEYS[4] new      (string) cmx:{t}:token:<D2> (rotate; revoke passes KEYS[1] again)
    KEYS[5] tokens   (hash)   the legacy tokens hash: digest -> player id
    KEYS[6] sessions (zset)   cmx:{t}:sessions:<PLR>: the player's other tokens -> their end (ms)

    ARGV[1] 'rotate', 'revoke' or 'adopt'
    ARGV[2] player id the old token names (read by the caller)
    ARGV[3] D1, the old token's SHA-256 hex
    ARGV[4] D2, the new token's SHA-256 hex (rotate)
    ARGV[5] the new token sealed under the old one, hex (rotate)
    ARGV[6] the token lifetime (ms)
    ARGV[7] how long a rotation may be replayed (ms)

  Output:
    { 1, expires_ms }          rotated now (expires_ms: the new token's end), or revoked (expires_ms 0)
    { 0, expires_ms, sealed }  a replay: this old token was rotated already; sealed is the new token then
    { 1, 0 } / { 2, 0 }        adopted / dropped (adopt)
    {-1, '' }                  the token names no player (unknown, expired, revoked, replay window over
                               or its successor no longer current); nothing changed
]]
local oldKey, rotatedKey, playerKey, newKey, tokensKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local sessionsKey = KEYS[6]
local op, playerId, oldDigest, newDigest, sealed = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local lifetime, replay = tonumber(ARGV[6]), tonumber(ARGV[7])

local holder = redis.call('GET', oldKey)
local legacy = false
if not holder then
  holder = redis.call('HGET', tokensKey, oldDigest)
  legacy = holder and true or false
end
local known = holder == playerId and redis.call('EXISTS', playerKey) == 1

if op == 'adopt' then
  if not legacy then return {-1, ''} end
  redis.call('HDEL', tokensKey, oldDigest)
  if not known then return {2, 0} end
  redis.call('SET', oldKey, playerId, 'PX', lifetime)
  if not redis.call('HGET', playerKey, 'token') then redis.call('HSET', playerKey, 'token', oldDigest) end
  return {1, 0}
end

if op == 'revoke' then
  if not known then return {-1, ''} end
  redis.call('DEL', oldKey)
  if legacy then redis.call('HDEL', tokensKey, oldDigest) end
  if redis.call('HGET', playerKey, 'token') == oldDigest then redis.call('HDEL', playerKey, 'token') end
  redis.call('ZREM', sessionsKey, oldDigest)
  return {1, 0}
end

if not known then
  local done = redis.call('GET', rotatedKey)
  if not done then return {-1, ''} end
  local owner, digest, expires, box = string.match(done, '^(%S+) (%x+) (%d+) (%x+)$')
  local current = redis.call('HGET', playerKey, 'token') == digest or redis.call('ZSCORE', sessionsKey, digest)
  if owner == playerId and current then return {0, tonumber(expires), box} end
  return {-1, ''}
end
if redis.call('EXISTS', newKey) == 1 then return {-1, ''} end  -- a fresh digest never collides
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', newKey, playerId, 'PX', lifetime)
redis.call('DEL', oldKey)
if legacy then redis.call('HDEL', tokensKey, oldDigest) end
if redis.call('ZREM', sessionsKey, oldDigest) == 1 then
  redis.call('ZADD', sessionsKey, now + lifetime, newDigest)
  redis.call('PEXPIRE', sessionsKey, lifetime)
else
  redis.call('HSET', playerKey, 'token', newDigest)
end
local record = playerId .. ' ' .. newDigest .. ' ' .. (now + lifetime) .. ' ' .. sealed
redis.call('SET', rotatedKey, record, 'PX', replay)
return {1, now + lifetime}
