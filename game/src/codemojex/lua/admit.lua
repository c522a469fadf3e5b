--[[
  admit: take one request's cost from up to two token buckets (an address's and a player's), or none.

  Called by codemojex.web.buckets.take (the host's rate limits, codemojex.web.admission). Each bucket is kept in its GCRA form: one
  string, the bucket's "theoretical arrival time" (ms, Redis server clock): a bucket of `capacity` tokens
  refilled one token every `period` ms is full when tat <= now, and a request of cost 1 fits while
  tat + period - now <= capacity * period. The key expires when the bucket would be full again, so an idle
  address or player leaves nothing behind (memory stays flat however many addresses call).
  Both buckets are checked before either is charged: a refused request costs nothing.
  The player's bucket is the player's, not the token's: the script reads the player id the token key
  names and charges ARGV[5] .. <player id> (same hash tag, same slot), so a rotation does not refill it.
  A token with no token key (a legacy token of the `tokens` hash, or an unknown one) is charged the
  bucket of its digest, KEYS[2], as before.

  Input:
    KEYS[1] address bucket (string)  cmx:{t}:bucket:<class>:a:<digest>
    KEYS[2] token bucket   (string)  cmx:{t}:bucket:<class>:p:<digest> (when KEYS[3] does not exist)
    KEYS[3] token key      (string)  cmx:{t}:token:<digest> -> the player id (read when ARGV[3] > 0)

    ARGV[1] the address bucket's capacity (tokens; 0: no address bucket)
    ARGV[2] the address bucket's period (ms per token, >= 1)
    ARGV[3] the player bucket's capacity (tokens; 0: no player bucket)
    ARGV[4] the player bucket's period (ms per token, >= 1)
    ARGV[5] the player bucket's prefix  cmx:{t}:bucket:<class>:u: (the key is the prefix .. player id)

  Output:
    { 1, 0 }            admitted; one token taken from each bucket used
    { 0, retry_ms, n }  refused by bucket n (1 address, 2 player); retry in retry_ms; nothing changed
]]
local addressKey, playerKey, tokenKey = KEYS[1], KEYS[2], KEYS[3]
local addressCapacity, addressPeriod = tonumber(ARGV[1]), tonumber(ARGV[2])
local playerCapacity, playerPeriod, playerPrefix = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]

-- The buckets themselves, shared with post_guess.lua: lua/includes/buckets.lua.
-- @include "buckets"

return (take_buckets(addressKey, playerKey, tokenKey, addressCapacity, addressPeriod,
  playerCapacity, playerPeriod, playerPrefix))
