--[[
  claim: move up to N jobs from their lanes to active, one lane per step of the ring.

  Called by echomq.lanes.claim. Each step first reads what it will touch: LINDEX ring 0 names the next
  lane, ZRANGE lane 0 0 its head (lowest priority, then lowest id = earliest minted), then that job's
  row. Only then does it write: LMOVE ring ring LEFT RIGHT rotates the ring, ZPOPMIN takes the head; the
  row becomes active with attempts + 1 (the fencing token) and tries + 1 (spent against max
  attempts) (the row's fields are one letter, include "row": 's' state, 'a' attempts, 't' tries, 'm'
  max, 'd' deadline, 'c' claimed_at, 'o' owner, 'r' request, 'u' due, 'k' late, '1'.. the payload); ZADD active places it at the lease deadline, TIME + lease, from the server clock. A lane
  left empty leaves the ring (it is at the ring's right end just after the LMOVE, so RPOP removes
  it). A job is in exactly one location before and after the script, so a crash at any point leaves
  it recoverable by the stalled sweep.

  Punctuality: a row promoted from delayed carries its due time ('u' due, ms, set by the sweep); its next
  claim replaces it with 'k' (late), the ms from that due time to this claim (server clock), so the
  lateness of delayed jobs and retries can be read from their rows.

  Wake-ups: a claim that leaves the ring empty deletes the wake tokens (nothing is left to wake for, but
  see 'Watch' below); one that leaves jobs behind (a full batch) pushes a token when the list is empty, so the wake-up passes
  on to the next idle worker instead of stopping at this one.

  Watch: a claim that makes 'active' non-empty and leaves the ring empty leaves one wake token, so one
  idle worker wakes, claims nothing, and learns from that empty claim's reply the earliest lease
  deadline: it sweeps then, so a job whose worker died is reclaimed at its deadline even when every
  other worker is idle (see echomq.worker.fetcher).

  Lane and job keys are built from ARGV[1] (the bus prefix, whose hash tag puts them in the slot of
  KEYS), so they cannot be declared. While the slot is being resharded (include "slot"), a step whose
  lane or job is not on this node stops the claim before that step's first write: the jobs claimed by
  the earlier steps are in active and returned, that job stays where it is, and 'slot_moving' counts
  the stop. A claim that meets the slot elsewhere from the start claims nothing (the caller tries
  again, as after an empty claim).

  Lost reply: a claim's reply can be lost after the script ran (a timeout, a cut, a Redis pause longer
  than the client's socket timeout); its jobs are then active under tokens nobody holds. So a claim
  with a request id (ARGV[5]) records what it claimed, 'id token id token ...', in its record
  '<prefix>claim:<request id>' for one lease, and a retry with the same request id (redis-py's own
  retry of the call, or the caller's) finds the record and answers with those jobs again instead of
  claiming new ones: each that is still active under its recorded token comes back with the same token
  and tries, its lease renewed to TIME + lease (counted as 'replayed'); nothing else moves, no try is
  spent. A job that left active since (its lease expired and was swept) is not returned. A claim that
  found nothing records nothing, so its retry simply claims. An empty request id records nothing (the
  benchmark's raw claims).

  Whose job: each claim also stores its request id on the row it claims (field 'r', request, '' for none;
  the trim deletes it, so a tombstone never carries it), and a replay returns a recorded job only when
  its row is active under the recorded token AND its 'request' is this request id. The token alone
  does not tell: the record lives one lease, and when the result ttl (dead ttl) and the dedup window
  are both shorter than that, a finished id can be trimmed, expire and be admitted anew within it,
  its attempts restarting at 0, so another worker's claim holds it under the very token recorded here;
  the replay must not hand that job to a second holder under the same token. The finishing scripts
  (complete, fail, extend, release, and an application's through the "finish" include) check the
  same field: a call that names its claim's request id is refused unless the row's 'request' is it,
  so a claim of the id's earlier life never finishes the new one.

  The record is built from ARGV, not declared: it does not exist before the claim runs, and a declared
  key that is absent makes Redis refuse the whole script while the slot moves (TRYAGAIN), so no worker
  could claim for the length of a reshard. While the slot moves, the record is read and written only
  when it is on this node (here()): on the source a command on a key it lacks fails, on the target an
  absent key may still be on the source (a second copy would make the move fail). So a claim during a
  move whose record is not here records nothing (counted as 'unrecorded'): a lost reply then strands
  its jobs for one lease, as without a request id (the stalled sweep returns them, the try spent), and
  a retry whose record is on the other node claims anew. In a replay, a recorded job whose row is not
  on this node is not returned (it waits out its lease the same way).

  Fairness lag: waiting[lane] is the 'claimed' serial since which the lane waits for service: set by
  every script that puts the lane in the ring, reset here after each claim that serves the lane, and
  removed when the lane leaves the ring. So serial - waiting[lane] is the number of claims served since
  the lane was last served (or became non-empty), which the rotation keeps below the lanes waiting.

  Gates (flow control, include "gates", echomq.flow): on a bus with any flow setting (the stats counter
  'flow_gates'), a claim takes nothing while the bus is paused or its slot moves; it first returns the
  throttled lanes whose rate window freed a claim to the ring; then each step checks the bus's rate window
  (full: the claim stops, deletes the wake tokens, and next_due says when the window frees a claim, so
  idle workers wait for that instead of waking each other for nothing) and its lane's gates: a paused lane, a lane at its concurrency cap ('lane-
  active') or over its rate window leaves the ring (LPOP: it is at the head) and is held ('held'; a
  throttled one also in 'throttled' until its oldest claim leaves the window), and the step claims
  nothing. A job claimed from a capped lane is marked 'K' and counted in 'lane-active'; the claim that
  brings the lane to its cap holds it. Each claim is counted in the rate windows that apply, member
  'id:token'. A bus without flow settings reads the one counter and nothing more.

  Input:
    KEYS[1] ring    (list)  serviceable lanes
    KEYS[2] active  (zset)  claimed ids by lease deadline (ms); its head is read by an empty claim
    KEYS[3] delayed (zset)  scheduled ids by due time (ms), read for the next due time only
    KEYS[4] wake    (list)  wake-up tokens: deleted when the ring is left empty, one pushed when not
    KEYS[5] stats   (hash)  counters; 'claimed' is also the serial of fairness lag
    KEYS[6] waiting (hash)  lane -> the 'claimed' serial since which it waits

    ARGV[1] bus prefix, e.g. 'emq:{cm}:'
    ARGV[2] lease (ms, > 0)
    ARGV[3] max jobs to claim (int >= 1)
    ARGV[4] owner (free text naming the worker, stored on the row)
    ARGV[5] request id (the caller's, the same on every retry of one claim), or '' for none

  Output:
    { now, next_due, n, id_1, lane_1, attempts_1, payload_1, deadline_1, tries_1, max_1, ... }
    { now, next_due, 0, next_lease }  a claim (not a retry) that got nothing
      now         server time (ms)
      next_due    due time (ms) of the earliest delayed job, or -1 when none; on a gated bus also of
                  the earliest throttled lane and of the bus's full rate window, when earlier
      n           number of claimed jobs, each followed by its 7 fields (a retry: the recorded jobs
                  still active under their tokens, with the renewed deadline)
      next_lease  the earliest lease deadline (ms) in active, or -1 when active is empty
]]
local ringKey, activeKey, delayedKey, wakeKey, statsKey, waitingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix, leaseMs, count, owner, request = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local recordKey = prefix .. 'claim:' .. request

-- @include "slot"
-- @include "row"
-- @include "gates"
-- @include "events"

local moving = slot_moving(prefix)
-- The record is read and written only where it is (see 'Lost reply' above).
local recorded = request ~= '' and (not moving or here(recordKey))

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + leaseMs

-- Flow control (include "gates"): a paused bus claims nothing, a bus over its rate stops claiming until
-- its window frees a claim, and each step passes its lane's gates first (see 'Gates' above).
local flags = redis.call('HMGET', statsKey, 'flow_gates', 'events')
local gated = flags[1] ~= false
local eventsCap = flags[2] or nil  -- the events stream's cap, when it is on (include "events")
local halted = false  -- the bus is paused, or its slot moves (a gated bus then claims nothing)
local busRate = nil  -- {n, ms}: the bus's rate
local blockedUntil = nil  -- when the bus's rate window frees a claim, once a step found it full

local function next_due()
  local first = redis.call('ZRANGE', delayedKey, 0, 0, 'WITHSCORES')
  local due = -1
  if first[2] then due = tonumber(first[2]) end
  if gated and not moving then
    local reopen = next_reopen(prefix)
    if blockedUntil and (reopen == nil or blockedUntil < reopen) then reopen = blockedUntil end
    if reopen and (due < 0 or reopen < due) then due = reopen end
  end
  return due
end

-- A retry of a claim that ran: answer with what it claimed (see 'Lost reply' above).
local record = recorded and redis.call('GET', recordKey)
if record then
  local reply = {now, next_due(), 0}
  local held = {}  -- every row is read before the first write (a refusal on a cluster changes nothing)
  for jobId, token in string.gmatch(record, '(%S+) (%d+)') do
    local jobKey = prefix .. 'job:' .. jobId
    if not moving or here(jobKey) then
      local row = redis.call('HMGET', jobKey, 's', 'a', 'l', '1', 't', 'm', 'r')
      -- Held by this request, not only under its token: an id admitted anew restarts its tokens.
      if row[1] == 'active' and row[2] == token and row[7] == request then
        row[4] = read_payload(jobKey, row[4])
        held[#held + 1] = {jobId, token, row}
      end
    end
  end
  for _, entry in ipairs(held) do
    local jobId, token, row = entry[1], entry[2], entry[3]
    redis.call('ZADD', activeKey, deadline, jobId)
    redis.call('HSET', prefix .. 'job:' .. jobId, 'd', deadline)
    local i = #reply
    reply[3] = reply[3] + 1
    reply[i + 1], reply[i + 2], reply[i + 3], reply[i + 4] = jobId, row[3], tonumber(token), row[4]
    reply[i + 5], reply[i + 6], reply[i + 7] = deadline, tonumber(row[5] or 0), tonumber(row[6])
  end
  if reply[3] > 0 then redis.call('HINCRBY', statsKey, 'replayed', reply[3]) end
  redis.call('PEXPIRE', recordKey, leaseMs)
  return reply
end

if gated then
  if moving then
    halted = true
  else
    local f = redis.call('HMGET', prefix .. 'flow', 'paused', 'rate')
    halted = f[1] ~= false
    local n, ms = rate_of(f[2] or nil)
    if n then busRate = {n, ms} end
    if not halted then reopen_due(prefix, now, ringKey, waitingKey, statsKey) end
  end
end

local ringLen = redis.call('LLEN', ringKey)  -- tracked: an emptied ring is not read again
local serial, lagMax = 0, 0
if ringLen > 0 then  -- an empty ring reads no counters (an idle worker's claim stays small)
  serial = tonumber(redis.call('HGET', statsKey, 'claimed') or '0')
  lagMax = tonumber(redis.call('HGET', statsKey, 'lag_max') or '0')
end
local out = {}
local n = 0
local claimed = {}  -- 'id token' of each claimed job, the record a retry answers from
local misses = 0
local elsewhere = 0

while n < count and ringLen > 0 and not halted do
  -- Every key of the step is read before its first write (see include "slot").
  local lane = redis.call('LINDEX', ringKey, 0)
  local laneKey = prefix .. 'lane:' .. lane
  if moving and not here(laneKey) then elsewhere = 1 break end
  -- The gates (not while the slot moves: a gated bus is halted then). A closed lane leaves the ring,
  -- held until the gate opens (include "gates"); a full bus window ends the claim.
  local laneCap, laneRate = nil, nil
  local closed = false
  if gated then
    if busRate then
      blockedUntil = rate_full(prefix .. 'rate', busRate[1], busRate[2], now)
      if blockedUntil then break end
    end
    local paused, cap, rateText = lane_gates(prefix, lane)
    local rn, rms = rate_of(rateText)
    local reopenAt = nil
    closed = paused or (cap ~= nil and active_of(prefix, lane) >= cap)
    if not closed and rn then
      reopenAt = rate_full(prefix .. 'rate:' .. lane, rn, rms, now)
      closed = reopenAt ~= nil
    end
    if closed then
      redis.call('LPOP', ringKey)  -- the lane is at the ring's head
      redis.call('HDEL', waitingKey, lane)
      redis.call('SADD', prefix .. 'held', lane)
      if reopenAt then redis.call('ZADD', prefix .. 'throttled', reopenAt, lane) end
      ringLen = ringLen - 1
    else
      laneCap = cap
      if rn then laneRate = {rn, rms} end
    end
  end
  if not closed then
    local head = redis.call('ZRANGE', laneKey, 0, 0)
    local depth = redis.call('ZCARD', laneKey)
    local jobId = head[1]
    local jobKey = nil
    local row = nil
    if jobId then
      jobKey = prefix .. 'job:' .. jobId
      if moving and not here(jobKey) then elsewhere = 1 break end
      row = redis.call('HMGET', jobKey, '1', 'm', 'u')
      row[1] = read_payload(jobKey, row[1])
    end
    local since = tonumber(redis.call('HGET', waitingKey, lane) or serial)

    redis.call('LMOVE', ringKey, ringKey, 'LEFT', 'RIGHT')
    local drained = depth <= 1
    if jobId then redis.call('ZPOPMIN', laneKey) end
    if drained then
      -- The lane is at the ring's right end just after the LMOVE: RPOP removes it.
      redis.call('RPOP', ringKey)
      redis.call('HDEL', waitingKey, lane)
      ringLen = ringLen - 1
    end
    if jobId then
      local attempts = redis.call('HINCRBY', jobKey, 'a', 1)
      local tries = redis.call('HINCRBY', jobKey, 't', 1)
      -- 'r' (request) names the claim that holds it, checked by a replay and the finishes ('Whose job').
      redis.call('HSET', jobKey, 's', 'active', 'd', deadline, 'c', now, 'o', owner, 'r', request)
      if row[3] then  -- the first claim since its promotion from delayed: how late it starts
        redis.call('HSET', jobKey, 'k', now - tonumber(row[3]))
        redis.call('HDEL', jobKey, 'u')
      end
      redis.call('ZADD', activeKey, deadline, jobId)
      local lag = serial - since  -- claims served before this one since the lane waits
      serial = serial + 1
      -- The lane was just served: it waits again from here (see 'Fairness lag' above).
      if not drained then redis.call('HSET', waitingKey, lane, serial) end
      if laneCap then  -- counted against the cap until it leaves active (include "gates": leave_active)
        redis.call('HSET', jobKey, 'K', 1)
        if redis.call('HINCRBY', prefix .. 'lane-active', lane, 1) >= laneCap then
          if not drained then  -- at its cap: out of the ring (at its right end just after the LMOVE)
            redis.call('RPOP', ringKey)
            redis.call('HDEL', waitingKey, lane)
            ringLen = ringLen - 1
          end
          redis.call('SADD', prefix .. 'held', lane)
        end
      end
      if laneRate then rate_count(prefix .. 'rate:' .. lane, jobId .. ':' .. attempts, laneRate[2], now) end
      if busRate then rate_count(prefix .. 'rate', jobId .. ':' .. attempts, busRate[2], now) end
      emit(eventsCap, prefix, 'claimed', jobId, lane, {'a', attempts, 't', now})
      if lag > lagMax then lagMax = lag end
      n = n + 1
      claimed[n] = jobId .. ' ' .. attempts
      out[#out + 1] = jobId
      out[#out + 1] = lane
      out[#out + 1] = attempts
      out[#out + 1] = row[1]
      out[#out + 1] = deadline
      out[#out + 1] = tries
      out[#out + 1] = tonumber(row[2])
    else
      -- An empty lane in the ring breaks the ring invariant (a foreign write); it was removed above.
      misses = misses + 1
      if misses > 16 then break end
    end
  end
end

if n > 0 then
  redis.call('HINCRBY', statsKey, 'claimed', n)
  redis.call('HSET', statsKey, 'lag_max', lagMax)
  if recorded then
    redis.call('SET', recordKey, table.concat(claimed, ' '), 'PX', leaseMs)
  elseif request ~= '' then
    redis.call('HINCRBY', statsKey, 'unrecorded', 1)
  end
end
if elsewhere > 0 then redis.call('HINCRBY', statsKey, 'slot_moving', 1) end
if ringLen == 0 or blockedUntil then  -- nothing claimable now (the bus's window: until next_due)
  redis.call('DEL', wakeKey)
  -- Active was empty before this claim: wake one idle worker to learn these leases ('Watch' above).
  -- Not while the slot moves: the source refuses a key this script emptied (see include "slot").
  if n > 0 and not moving and redis.call('ZCARD', activeKey) == n then redis.call('LPUSH', wakeKey, '1') end
elseif not halted and redis.call('LLEN', wakeKey) == 0 then
  redis.call('LPUSH', wakeKey, '1')  -- jobs left behind: pass the wake-up on to the next idle worker
end
local reply = {now, next_due(), n}
for i = 1, #out do reply[#reply + 1] = out[i] end
if n == 0 then  -- a claim that got nothing names the earliest lease deadline ('Watch' above)
  local first = redis.call('ZRANGE', activeKey, 0, 0, 'WITHSCORES')
  reply[4] = first[2] and tonumber(first[2]) or -1
end
return reply
