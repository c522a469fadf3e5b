--[[
  await: a job's end if it has one; else count the caller among its waiters (echomq.results).

  Called by echomq.results.result. A done row answers its result, a dead one its error. Any other row,
  when the caller registers, gains a waiter ('W' + 1), so whatever ends the job pushes a token to
  '<prefix>signal:<id>' for this caller to pop (include "signal"); the caller checks first and blocks
  after, and the check and the count are one step, so an end between the two is never missed.

  Lost reply: a waiter counted twice costs one extra token, which expires with the signal list.

  Input:
    KEYS[1] job (hash)  the row

    ARGV[1] register: 1 to count the caller as a waiter, 0 to look only

  Output:
    { 1, 'done', result }   done
    { 1, 'dead', error }    dead-lettered (failed for good, cancelled or revoked)
    { 2, state, '' }        finished, but its row is trimmed to a tombstone: the result is gone
    { 0, state, '' }        not finished (queued, delayed or active)
    {-1, '', '' }           no row for that id
]]
local jobKey, register = KEYS[1], ARGV[1] == '1'

-- @include "row"

local row = redis.call('HMGET', jobKey, 's', 'l', 'x', 'e', 'T')
if not row[2] or row[5] then
  local tomb = tombstone_at(jobKey)
  if tomb then return {2, tomb.state, ''} end
  if not row[2] then return {-1, '', ''} end
  return {2, state_of(row[1]), ''}
end
local state = state_of(row[1])
if state == 'done' then return {1, 'done', row[3] or ''} end
if state == 'dead' then return {1, 'dead', row[4] or ''} end
if register then redis.call('HINCRBY', jobKey, 'W', 1) end
return {0, state, ''}
