--[[
  admit: take one request's cost from up to two token buckets (an address's and a player's), or none.

  Called by codemojex.web.admission (the host's rate limits). Each bucket is kept in its GCRA form: one
  string, the bucket's "theoretical arrival time" (ms, Redis server clock): a bucket of `capacity` tokens
  refilled one token every `period` ms is full when tat <= now, and a request of cost 1 fits while
  tat + period - now <= capacity * period. The key expires when the bucket would be full again, so an idle
  address or player leaves nothing behind (memory stays flat however many addresses call).
  Both buckets are checked before either is charged: a refused request costs nothing.

  Input:
    KEYS[1] address bucket (string)  cmx:{t}:bucket:<class>:a:<digest>
    KEYS[2] player bucket  (string)  cmx:{t}:bucket:<class>:p:<digest> (unused when ARGV[3] is 0)

    ARGV[1] the address bucket's capacity (tokens, >= 1)
    ARGV[2] the address bucket's period (ms per token, >= 1)
    ARGV[3] the player bucket's capacity (tokens; 0: no player bucket)
    ARGV[4] the player bucket's period (ms per token, >= 1)

  Output:
    { 1, 0 }            admitted; one token taken from each bucket used
    { 0, retry_ms, n }  refused by bucket n (1 address, 2 player); retry in retry_ms; nothing changed
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local used = 1
if tonumber(ARGV[3]) > 0 then used = 2 end

local next_tat = {}
for n = 1, used do
  local capacity = tonumber(ARGV[2 * n - 1])
  local period = tonumber(ARGV[2 * n])
  local tat = tonumber(redis.call('GET', KEYS[n]) or '0')
  if tat < now then tat = now end
  local after = tat + period
  local over = after - now - capacity * period
  if over > 0 then return {0, over, n} end
  next_tat[n] = after
end
for n = 1, used do
  redis.call('SET', KEYS[n], string.format('%d', next_tat[n]), 'PX', next_tat[n] - now)
end
return {1, 0}
