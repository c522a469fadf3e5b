--[[
  idempotency: claim and release a player's Idempotency-Key, so that a key no guess was admitted under
  is kept only briefly while a key a guess was admitted under is kept the full window.

  Called by codemojex.web.idempotency (claim before guesses.submit, release after its answer). The key
  is a hash: 'job' the JOB id the key names, 'digest' the request as sent, 'inflight' how many requests
  hold a claim now, 'admitted' set once a request saw its guess admitted (or a duplicate of it).
  claim: store the job and digest if the key is new, else read them; with the same digest, count one
  more request in flight and keep the key ARGV[4] ms (the full window) from now; with another digest,
  change nothing (the caller answers 409).
  release: count the request out (its JOB was admitted if ARGV[3] is '1'). When none is left in flight
  and none was ever admitted, the key is kept only ARGV[5] ms: no copy of the request can be admitted
  under its JOB any more (every copy claims before it submits), so when the key ends a retry mints a
  new JOB and pays at most once. A request that never releases (a crash, an unknown outcome) leaves
  the key its full window.
  A key in the old form (a string '<JOB> <digest>', kept 24 h) is read as it is and never counted.

  Input:
    KEYS[1] key      (hash)   cmx:{t}:idempotency:<PLR>:<sha256 of the Idempotency-Key>

    ARGV[1] 'claim' or 'release'
    ARGV[2] the JOB id (claim: the one to store if the key is new; release: the one claimed)
    ARGV[3] claim: the request digest; release: '1' if the JOB was admitted, else '0'
    ARGV[4] the full window (ms)
    ARGV[5] the life of a key no guess was admitted under (ms)

  Output:
    claim:   { 1, job, digest } stored now; { 0, job, digest } stored before (digest may differ: then
             nothing was counted)
    release: 2 the key was shortened; 1 counted out; 0 nothing to release (gone, another job, old form)
]]
local key = KEYS[1]
local op, job, third = ARGV[1], ARGV[2], ARGV[3]
local window, brief = tonumber(ARGV[4]), tonumber(ARGV[5])

local kind = redis.call('TYPE', key).ok
if kind == 'string' then
  if op == 'release' then return 0 end
  local stored = redis.call('GET', key)
  local space = string.find(stored, ' ', 1, true) or (#stored + 1)
  return {0, string.sub(stored, 1, space - 1), string.sub(stored, space + 1)}
end

if op == 'claim' then
  if kind == 'none' then
    redis.call('HSET', key, 'job', job, 'digest', third, 'inflight', 1)
    redis.call('PEXPIRE', key, window)
    return {1, job, third}
  end
  local stored = redis.call('HMGET', key, 'job', 'digest')
  if stored[2] == third then
    redis.call('HINCRBY', key, 'inflight', 1)
    redis.call('PEXPIRE', key, window)
  end
  return {0, stored[1], stored[2]}
end

if op == 'release' then
  if kind ~= 'hash' or redis.call('HGET', key, 'job') ~= job then return 0 end
  local left = redis.call('HINCRBY', key, 'inflight', -1)
  if third == '1' then
    redis.call('HSET', key, 'admitted', 1)
    redis.call('PEXPIRE', key, window)
  end
  if left <= 0 and redis.call('HEXISTS', key, 'admitted') == 0 then
    redis.call('PEXPIRE', key, brief)
    return 2
  end
  return 1
end
return redis.error_reply('idempotency: unknown op ' .. tostring(op))
