-- include "signal": wake the callers waiting for a job's end (echomq.results). Needs "row" (job_place).
--
-- A caller that waits for a job's result counts itself on the row ('W', through await.lua) after
-- finding it unfinished; whatever ends the job (complete, a fail or sweep that dead-letters it, cancel,
-- revoke) then pushes one token per waiter to '<prefix>signal:<id>', which lives SIGNAL_TTL_MS, and
-- clears 'W'. Each waiter blocks on that list (BLPOP) and reads the row again when it pops, so a token
-- left by a waiter that gave up only makes another waiter look once more.

local SIGNAL_TTL_MS = 60000
local SIGNAL_MAX = 1000  -- tokens pushed at most: a waiter beyond it wakes at its timeout's re-check

local function signal_end(jobKey)
  local waiters = tonumber(redis.call('HGET', jobKey, 'W') or '0')
  if waiters <= 0 then return end
  redis.call('HDEL', jobKey, 'W')
  local prefix, jobId = job_place(jobKey)
  local signalKey = prefix .. 'signal:' .. jobId
  local tokens = {}
  for i = 1, math.min(waiters, SIGNAL_MAX) do tokens[i] = '1' end
  redis.call('RPUSH', signalKey, unpack(tokens))
  redis.call('PEXPIRE', signalKey, SIGNAL_TTL_MS)
end
