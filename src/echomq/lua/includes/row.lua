-- include "row": the job row's short field names, its payload chunks and its admission digest.
--
-- A row is a small hash, and Redis keeps a hash compact (a listpack; a ziplist on 6.2) only while every
-- field and value is at most 64 bytes and it has at most 512 fields (hash-max-listpack-value/-entries,
-- the defaults, never changed). So the field names are one letter (echomq.rows maps them back to the
-- documented names), a field that would hold its default is left out, and the payload is split into
-- chunks of at most 64 bytes in the fields '1', '2', ... ('1' always present, '' for an empty payload):
--
--   s state      absent while queued; 'delayed' | 'active' | 'done' | 'dead'
--   l lane       always present: a row exists iff it has 'l'
--   1, 2, ...    the payload in chunks of ROW_CHUNK bytes (gone from a tombstone)
--   g digest     8 bytes: the admission digest when the caller chose it (codemojex's request digest)
--                and on a tombstone; absent on a whole row admitted by enqueue (it is the payload's)
--   a attempts   the fencing token (absent = 0)      t tries (absent = 0)     m max attempts
--   p priority   (absent = 0)                        d deadline (ms)          c claimed_at (ms)
--   o owner      r request (the claim call's id)     u due (ms, promoted)     k late (ms)
--   f finished   e error     x result     n ended (include "ended")     b retried_by
--   T trimmed    (ms; the row is a tombstone)
--   w admitted   (ms) written by an application's admission that wants it (codemojex's submit)
--   K capped     the claim counted it against its lane's cap (include "gates")
--   W waiters    callers waiting for its end (include "signal")
--   z ended_by   the request id of the cancel or revoke that ended it (cancel.lua, revoke.lua)
-- A job's admission time is its id's mint time (echomq.ids.timestamp_ms); no field holds it.

local ROW_CHUNK = 64

-- The 8 leading bytes of a hex digest (40 hex digits of a sha1), as raw bytes; any other text is
-- first hashed (sha1) so that it has a digest too.
local function short_digest(hex)
  if not string.match(hex, '^' .. string.rep('%x', 16)) then hex = redis.sha1hex(hex) end
  local bytes = {}
  for i = 1, 16, 2 do bytes[#bytes + 1] = string.char(tonumber(string.sub(hex, i, i + 1), 16)) end
  return table.concat(bytes)
end

-- The admission digest of a payload admitted by enqueue (no digest of the caller's).
local function payload_digest(payload)
  return short_digest(redis.sha1hex(payload))
end

-- Append the payload's chunk fields and values to the HSET argument list `args`.
local function payload_args(args, payload)
  local n = 0
  repeat
    n = n + 1
    args[#args + 1] = tostring(n)
    args[#args + 1] = string.sub(payload, (n - 1) * ROW_CHUNK + 1, n * ROW_CHUNK)
  until n * ROW_CHUNK >= #payload
  return args
end

-- The payload of the row at `jobKey`, given its first chunk (field '1', already read), or nil when
-- `first` is nil (no row, or a tombstone).
local function read_payload(jobKey, first)
  if not first then return nil end
  local parts = {first}
  while #parts[#parts] == ROW_CHUNK do
    local more = redis.call('HGET', jobKey, tostring(#parts + 1))
    if not more then break end
    parts[#parts + 1] = more
  end
  return table.concat(parts)
end

-- The state a row's 's' field names (absent: queued).
local function state_of(s)
  return s or 'queued'
end

-- Tombstones. Once a finished row's ttl passed, the trim deletes the row and leaves its tombstone, a
-- field of a hash shared by the ids minted in the same ~65 s (the first TOMB_DIGITS digits of the id's
-- body, its mint time's high bits): '<prefix>tomb:<digits>' -> field: the rest of the id, value:
-- '<8-byte digest of lane and admission digest><d|x, done|dead><attempts>:<expiry ms>'. No key and no
-- expiry per tombstone: the hash expires when its latest tombstone does, and a tombstone read past its
-- own expiry counts as absent. So an admission, a retried finish or an inspection looks in exactly one
-- place, and a tombstone costs a hash field (about 90 bytes in a hash table, far less in a listpack).
local TOMB_DIGITS = 7
local JOB_ID_LENGTH = 26  -- echomq.ids: a brand of 3 letters and 23 digits

-- The bus prefix and the job id of a row's key ('<prefix>job:<JOB>').
local function job_place(jobKey)
  return string.sub(jobKey, 1, #jobKey - JOB_ID_LENGTH - 4), string.sub(jobKey, -JOB_ID_LENGTH)
end

local B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'  -- echomq.ids' alphabet (Crockford's base32)
local B32_VALUE = {}
for i = 1, 32 do B32_VALUE[string.sub(B32, i, i)] = i - 1 end

-- The bytes of base32 `text` whose length is a multiple of 8 (each 8 digits, 40 bits, are 5 bytes).
local function b32_bytes(text)
  local out = {}
  for i = 1, #text, 8 do
    local n = 0
    for j = i, i + 7 do n = n * 32 + B32_VALUE[string.sub(text, j, j)] end
    local bytes = {}
    for k = 5, 1, -1 do
      bytes[k] = n % 256
      n = math.floor(n / 256)
    end
    out[#out + 1] = string.char(unpack(bytes))
  end
  return table.concat(out)
end

-- The hash and the field that hold the tombstone of `jobId`: the field is the rest of the id's digits
-- (16, after the hash's 7) as 10 bytes, which Redis stores in its smallest allocation.
local function tomb_place(prefix, jobId)
  return prefix .. 'tomb:' .. string.sub(jobId, 4, 3 + TOMB_DIGITS), b32_bytes(string.sub(jobId, 4 + TOMB_DIGITS))
end

-- What a tombstone keeps of the admission: 8 bytes of the lane and the admission digest together.
local function tomb_digest(lane, digest)
  return short_digest(redis.sha1hex(lane .. '\n' .. digest))
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The tombstone of the row at `jobKey`, { state = 'done' | 'dead', attempts = '<n>', digest = <8 bytes> },
-- or nil when there is none or it is past its expiry.
local function tombstone_at(jobKey)
  local bucketKey, field = tomb_place(job_place(jobKey))
  local value = redis.call('HGET', bucketKey, field)
  if not value then return nil end
  local attempts, expires = string.match(string.sub(value, 10), '^(%d+):(%d+)$')
  if tonumber(expires) <= now_ms() then return nil end
  local state = 'done'
  if string.sub(value, 9, 9) == 'x' then state = 'dead' end
  return {state = state, attempts = attempts, digest = string.sub(value, 1, 8)}
end

-- Write the tombstone of `jobId` (see above), which counts until `expires` (ms); `now` in ms.
local function write_tombstone(prefix, jobId, state, attempts, digest, expires, now)
  local bucketKey, field = tomb_place(prefix, jobId)
  local mark = 'd'
  if state == 'dead' then mark = 'x' end
  redis.call('HSET', bucketKey, field, digest .. mark .. (attempts or '0') .. ':' .. expires)
  local ttl = redis.call('PTTL', bucketKey)
  if ttl < 0 or now + ttl < expires then redis.call('PEXPIREAT', bucketKey, expires) end
end
