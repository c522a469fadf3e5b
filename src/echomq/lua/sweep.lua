--[[
  sweep: reclaim expired leases, promote due delayed jobs, trim old finished rows.

  Called by echomq.sweep.sweep: by a worker when a step is due (its last reply said when), and by
  `echomq sweep`. Idempotent: any number of processes may run it at once. Steps, each bounded by the
  limit (ARGV[2]) of jobs:
    1. promote: delayed jobs whose due time has passed go to their lane (always done);
    2. reclaim: active jobs whose lease deadline (server clock) has passed go back to their lane at
       their mint position, or to dead when their tries reached max attempts;
    3. trim: done rows finished the result ttl or more ago, and dead rows dead-lettered the dead ttl
       or more ago, keep only a tombstone (state, lane, digest, attempts, ...) that expires one dedup
       window after the finish, so late duplicates are still absorbed (a tombstone already past its
       window is deleted at once); the rule is includes/trim.lua's (always done).
  Step 2 runs only when the sweep lock is free (ARGV[3] > 0), so N callers on one bus reclaim about
  once per period, not N times, or when forced (ARGV[3] == 0; workers force it: they sweep only when
  a lease is due, and a lock taken for one deadline must not hide the next). Step 3 is not behind the
  lock: every finish trims a few expired rows itself (complete, score, fail's dead path), which keeps
  up with any throughput, and each sweep takes up to ARGV[2] more of each set, which catches up after
  a burst or on an idle bus.

  Punctuality: a promoted row keeps its due time ('u', ms); the claim that starts it turns that
  into 'k', late (ms from the due time to that claim, server clock), kept on the row.

  The row's fields are one letter (include "row"): 'l' lane, 'p' priority (absent: 0), 't' tries
  (absent: 0), 'm' max attempts, 'd' deadline, 's' state (absent: queued), 'f' finished, 'e' error.

  Wake-ups: one token per job moved to a lane (promoted or reclaimed), up to the wake cap, so as many
  idle workers wake as the moved jobs can use (a worker woken for nothing claims nothing, and that
  empty claim clears the list).

  Idle: each step first reads its set's head (ZRANGE 0 0), and a step whose head is not due reads
  nothing more, so a sweep of a bus with nothing due runs TIME and four ZRANGE. Its reply names when
  the next step is due (next_due, next_lease, next_trim), so a worker sweeps then and not on a timer
  (see echomq.worker.fetcher).

  Only the server clock is read (TIME): worker clocks, skewed or not, never decide a lease.
  Lane and job keys are built from ARGV[1] (the bus prefix, whose hash tag puts them in the slot), so
  they cannot be declared. Each job's move reads its row and the lane it goes to before its first
  write; while the slot is being resharded (include "slot") a job whose row or lane is not on this
  node stops the sweep there: the jobs moved before it are whole, it and the rest stay where they are
  for a later sweep, and 'slot_moving' counts the stop (a lane absent everywhere cannot be told from a
  lane on the other node, so its jobs wait for the end of the move).

  Input:
    KEYS[1] active  (zset)    claimed ids by lease deadline (ms)
    KEYS[2] delayed (zset)    scheduled ids by due time (ms)
    KEYS[3] done    (zset)    finished ids by finish time (ms)
    KEYS[4] dead    (zset)    dead-lettered ids by time (ms)
    KEYS[5] ring    (list)    serviceable lanes
    KEYS[6] wake    (list)    wake-up tokens
    KEYS[7] stats   (hash)    counters
    KEYS[8] lock    (string)  the sweep lock
    KEYS[9] waiting (hash)    lane -> the 'claimed' serial since which it waits (fairness lag)

    ARGV[1] bus prefix, e.g. 'emq:{cm}:'
    ARGV[2] limit: max jobs per step (int >= 1)
    ARGV[3] lock period (ms); 0 forces step 2 regardless of the lock
    ARGV[4] result ttl (ms): how long a done row is kept whole
    ARGV[5] dedup window (ms): how long after its finish a tombstone absorbs duplicates
    ARGV[6] wake cap
    ARGV[7] dead ttl (ms): how long a dead row is kept whole for inspection and retry

  Output:
    { promoted, reclaimed, dead, trimmed, next_due, swept, now, next_lease, next_trim }
      next_due    due time (ms) of the earliest delayed job left, or -1
      swept       1 when step 2 ran, 0 when another process holds the lock
      now         server time (ms) the sweep ran at, to place the times on the caller's own clock
      next_lease  the earliest lease deadline (ms) left in active, or -1 when active is empty
      next_trim   when (ms) the oldest done or dead row passes its ttl, or -1 when both are empty
    While the slot moves, a set this sweep changed and that is no longer on this node is not read:
    next_due is then -1, and next_lease, next_trim are now (look again later).
]]
local activeKey, delayedKey, doneKey, deadKey, ringKey, wakeKey, statsKey, lockKey, waitingKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local prefix, limit, lockMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local resultTtl, dedupWindow, wakeCap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local deadTtl = tonumber(ARGV[7])

-- @include "trim"
-- (include "slot" comes with "trim")
-- @include "gates"
-- @include "signal"

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- The score of a sorted set's first member, or nil when it is empty.
local function head(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return nil
end

-- Each step first looks at its set's head (see 'Idle' above): a step with nothing due reads nothing more.
local dueHead, leaseHead, doneHead, deadHead = head(delayedKey), head(activeKey), head(doneKey), head(deadKey)

local queued = 0
local moving = nil  -- asked once, and only when a step has a job to move (see include "slot")
local elsewhere = false  -- a step found a key on another node: the sweep stopped there

local function is_moving()
  if moving == nil then moving = slot_moving(prefix) end
  return moving
end

-- Read before a step's first write: may this step go on? While the slot moves, only when the row (and
-- the lane it goes to, if any) are on this node; a lane that is absent everywhere counts as elsewhere
-- too, since this node cannot tell the two apart (the job then waits for the end of the move).
local function local_step(jobKey, lane)
  if not is_moving() then return true end
  if here(jobKey) and (lane == nil or here(prefix .. 'lane:' .. lane)) then return true end
  elsewhere = true
  return false
end

local function toLane(jobId, jobKey, lane, priority)
  local laneKey = prefix .. 'lane:' .. lane
  redis.call('ZADD', laneKey, tonumber(priority or 0), jobId)
  if redis.call('ZCARD', laneKey) == 1 then offer_lane(prefix, ringKey, waitingKey, statsKey, lane) end
  redis.call('HDEL', jobKey, 's')  -- absent: queued (include "row")
  queued = queued + 1
end

local promoted, reclaimed, dead, trimmed, swept = 0, 0, 0, 0, 0

if dueHead and dueHead <= now then
  local due = redis.call('ZRANGEBYSCORE', delayedKey, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #due, 2 do
    local jobId = due[i]
    local jobKey = prefix .. 'job:' .. jobId
    if not local_step(jobKey, nil) then break end
    local row = redis.call('HMGET', jobKey, 'l', 'p')
    if not local_step(jobKey, row[1]) then break end
    redis.call('ZREM', delayedKey, jobId)
    if row[1] then
      toLane(jobId, jobKey, row[1], row[2])
      redis.call('HSET', jobKey, 'u', due[i + 1])  -- the claim that starts it records its lateness
      promoted = promoted + 1
    end
  end
end

local left = 0  -- jobs that left active in step 2
if not elsewhere and (lockMs == 0 or redis.call('SET', lockKey, '1', 'NX', 'PX', lockMs)) then
  swept = 1
  local expired = {}
  if leaseHead and leaseHead < now then
    expired = redis.call('ZRANGEBYSCORE', activeKey, '-inf', '(' .. now, 'LIMIT', 0, limit)
  end
  for _, jobId in ipairs(expired) do
    local jobKey = prefix .. 'job:' .. jobId
    if not local_step(jobKey, nil) then break end
    local row = redis.call('HMGET', jobKey, 'l', 'p', 't', 'm')
    local lane = row[1]
    if row[1] and tonumber(row[3] or 0) >= tonumber(row[4]) then lane = nil end  -- to dead, no lane
    if not local_step(jobKey, lane) then break end
    redis.call('ZREM', activeKey, jobId)
    redis.call('HDEL', jobKey, 'd')
    left = left + 1
    if row[1] then
      if leave_active(prefix, jobKey, row[1], ringKey, waitingKey, statsKey) then queued = queued + 1 end
      if tonumber(row[3] or 0) >= tonumber(row[4]) then
        redis.call('ZADD', deadKey, now, jobId)
        redis.call('HSET', jobKey, 's', 'dead', 'f', now,
          'e', 'lease expired on the last of ' .. row[4] .. ' attempts')
        signal_end(jobKey)
        dead = dead + 1
      else
        toLane(jobId, jobKey, row[1], row[2])
        reclaimed = reclaimed + 1
      end
    end
  end
end

local doneTrimmed, deadTrimmed = 0, 0
if not elsewhere then
  if doneHead and doneHead <= now - resultTtl then
    doneTrimmed = trim_expired(doneKey, statsKey, prefix, now, resultTtl, dedupWindow, limit)
  end
  if dead > 0 and (deadHead == nil or now < deadHead) then deadHead = now end
  if deadHead and deadHead <= now - deadTtl then
    deadTrimmed = trim_expired(deadKey, statsKey, prefix, now, deadTtl, dedupWindow, limit)
  end
  trimmed = doneTrimmed + deadTrimmed
end

-- Flow control (include "gates"): throttled lanes whose window freed a claim, and any held lane whose
-- gate opened without reopening it (a slot move in between), go back into the ring.
local gated = not elsewhere and not is_moving() and gates_on(statsKey)
if gated then
  queued = queued + reopen_due(prefix, now, ringKey, waitingKey, statsKey)
  queued = queued + reopen_held(prefix, ringKey, waitingKey, statsKey, 20)
end

if promoted > 0 then redis.call('HINCRBY', statsKey, 'promoted', promoted) end
if reclaimed > 0 then redis.call('HINCRBY', statsKey, 'reclaimed', reclaimed) end
if dead > 0 then redis.call('HINCRBY', statsKey, 'dead', dead) end
if queued > 0 then
  local tokens = math.min(queued, wakeCap - redis.call('LLEN', wakeKey))
  for _ = 1, tokens do redis.call('LPUSH', wakeKey, '1') end
end

if elsewhere then redis.call('HINCRBY', statsKey, 'slot_moving', 1) end

-- The heads this sweep changed are read again; a set this script may have emptied is read only where
-- it is (see include "slot"). Unknown (elsewhere): -1 for the delayed set, now for the others.
local function head_after(key, before, changed, unknown)
  if not changed then return before end
  if is_moving() and not here(key) then return unknown end
  return head(key)
end
local nextDue = head_after(delayedKey, dueHead, promoted > 0, nil) or -1
local reopen = gated and next_reopen(prefix)
if reopen and (nextDue < 0 or reopen < nextDue) then nextDue = reopen end
local nextLease = head_after(activeKey, leaseHead, left > 0, now) or -1
doneHead = head_after(doneKey, doneHead, doneTrimmed > 0, now - resultTtl)
deadHead = head_after(deadKey, deadHead, deadTrimmed > 0, now - deadTtl)
local nextTrim = -1
if doneHead then nextTrim = doneHead + resultTtl end
if deadHead and (nextTrim < 0 or deadHead + deadTtl < nextTrim) then nextTrim = deadHead + deadTtl end
return {promoted, reclaimed, dead, trimmed, nextDue, swept, now, nextLease, nextTrim}
