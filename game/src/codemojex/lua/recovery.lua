--[[
  recovery: set a player's recovery code (a new one revokes the old one), or trade a code for a token.

  Called by codemojex.recovery.issue and codemojex.recovery.sign_in. A recovery code is 100 random bits
  (codemojex.recovery.new_code); Redis keeps only its SHA-256, as the key recovery:<Dc> -> the player id,
  and the player's record names the current one (field 'recovery'), so a player has at most one code
  that works. The caller read the player id (issue: from the bearer token; sign_in: from KEYS[2]) and
  passes it; the script checks it again, so a change in between refuses the call and changes nothing.

  issue: the new code's key is written and the record names it; the code the record names now is
  deleted (KEYS[3], the caller's read of it, or, when another issue came between that read and this
  call, its key built from KEYS[2]'s prefix: same hash tag, same slot). So concurrent issues for one
  player all succeed, in some order, and leave exactly one code in force, the last one's. A retry with
  the same arguments (redis-py after a timeout) finds the record naming the new digest already and
  answers 1 again. A lost reply leaves the new code in force, the old one revoked, and nobody holding
  the new one: the client asks again (another new code).
  signin: a new token (KEYS[4], digest ARGV[3]) is bound to the player with the full lifetime and listed
  in the player's sessions (KEYS[5], zset digest -> expiry ms, whose key lives as long as its newest
  token). The other tokens of the player stay valid, unless ARGV[6] is '1': then every other token
  (the record's and the sessions') is deleted in the same step; a player whose record names no token
  may be one from before token keys, so the entries of the legacy tokens hash naming them go too (a
  scan of that hash, which the migration sweep drains to nothing, so it is empty once migrated). Sessions whose tokens ended are
  dropped; past ARGV[7] live sessions the oldest is revoked, so a player's tokens stay bounded. A retry
  with the same arguments finds the token bound already and answers its end again. A lost reply leaves
  a token nobody holds (only its digest is stored); the client's new call mints another.
  Token keys other than the declared ones, and the legacy tokens hash, are built from KEYS[4]'s prefix:
  the same hash tag, so the same slot.

  Input:
    KEYS[1] player   (hash)   cmx:{t}:player:<PLR>, fields 'recovery' (digest), 'token', 'skeleton'
    KEYS[2] code     (string) cmx:{t}:recovery:<Dc>: issue, the new code's; signin, the presented code's
    KEYS[3] old      (string) issue: the current code's key as the caller read it (KEYS[2] when none)
    KEYS[4] token    (string) signin: cmx:{t}:token:<Dt>, the new token's key (issue: KEYS[2] again)
    KEYS[5] sessions (zset)   cmx:{t}:sessions:<PLR>: tokens issued by signin -> their end (ms)

    ARGV[1] 'issue' or 'signin'
    ARGV[2] player id
    ARGV[3] issue: the new code's SHA-256 hex; signin: the new token's SHA-256 hex
    ARGV[4] issue: the current code's digest the caller read ('' none); signin: the presented code's
    ARGV[5] signin: the skeleton of the name the caller gave, or '' (no name given)
    ARGV[6] signin: '1' to revoke every other token of the player, else '0'
    ARGV[7] signin: the token lifetime (ms)
    ARGV[8] signin: the most live sessions a player keeps

  Output:
    { 1, expires_ms }  issued (expires_ms 0), or signed in: the new token ends at expires_ms
    {-1, 0 }           no such player, or (signin) the code or the name does not name them; nothing changed
]]
local playerKey, codeKey, oldKey, tokenKey, sessionsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op, playerId, digest, other, shape = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local everywhere, lifetime, most = ARGV[6] == '1', tonumber(ARGV[7]), tonumber(ARGV[8])

if redis.call('EXISTS', playerKey) == 0 then return {-1, 0} end
local current = redis.call('HGET', playerKey, 'recovery') or ''

if op == 'issue' then
  if current == digest then return {1, 0} end
  if current ~= '' then
    local currentKey = oldKey
    if current ~= other then currentKey = string.match(codeKey, '^(.*)recovery:%x+$') .. 'recovery:' .. current end
    if redis.call('GET', currentKey) == playerId then redis.call('DEL', currentKey) end
  end
  redis.call('SET', codeKey, playerId)
  redis.call('HSET', playerKey, 'recovery', digest)
  return {1, 0}
end

if current ~= other or redis.call('GET', codeKey) ~= playerId then return {-1, 0} end
if shape ~= '' and redis.call('HGET', playerKey, 'skeleton') ~= shape then return {-1, 0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holder = redis.call('GET', tokenKey)
if holder == playerId then return {1, now + redis.call('PTTL', tokenKey)} end
if holder then return {-1, 0} end  -- a fresh digest never collides
local prefix = string.match(tokenKey, '^(.*)token:%x+$')
if everywhere then
  for _, old in ipairs(redis.call('ZRANGE', sessionsKey, 0, -1)) do redis.call('DEL', prefix .. 'token:' .. old) end
  redis.call('DEL', sessionsKey)
  local primary = redis.call('HGET', playerKey, 'token')
  if primary then
    if redis.call('GET', prefix .. 'token:' .. primary) == playerId then redis.call('DEL', prefix .. 'token:' .. primary) end
    redis.call('HDEL', playerKey, 'token')
  else
    -- a player from before token keys: their token may still be in the legacy hash (until the sweep)
    local legacyKey = prefix .. 'tokens'
    if redis.call('HLEN', legacyKey) > 0 then
      local cursor = '0'
      repeat
        local page = redis.call('HSCAN', legacyKey, cursor, 'COUNT', 200)
        cursor = page[1]
        for i = 1, #page[2], 2 do
          if page[2][i + 1] == playerId then redis.call('HDEL', legacyKey, page[2][i]) end
        end
      until cursor == '0'
    end
  end
else
  local ended = redis.call('ZRANGEBYSCORE', sessionsKey, '-inf', now)
  if #ended > 0 then redis.call('ZREM', sessionsKey, unpack(ended)) end
  while redis.call('ZCARD', sessionsKey) >= most do
    local oldest = redis.call('ZPOPMIN', sessionsKey)
    redis.call('DEL', prefix .. 'token:' .. oldest[1])
  end
end
redis.call('SET', tokenKey, playerId, 'PX', lifetime)
redis.call('ZADD', sessionsKey, now + lifetime, digest)
redis.call('PEXPIRE', sessionsKey, lifetime)
return {1, now + lifetime}
