--[[
  conclude_round: once a round is closed, write its compact summary (kept for good), list it in the
  history, reveal its secret and announce the close with its winners on its event stream: all once.

  Called by codemojex.history.conclude_round (the score worker's upkeep pass: a user that may read the
  secret). A round is closed by a call (close_round.lua) or by its close time on the server clock; one
  closed by its clock is marked closed here as close_round.lua would. Guesses admitted before the close
  may still be in the queue: while some are (the round's charges outnumber its scored records and its
  refunds) the summary waits, at most `grace` ms after the close, so the final board counts them. A
  refund marker 'recharged' (refunded, retried, charged again and scored) is not counted as a refund:
  that guess is settled by its record, and counting it twice would let the summary skip a queued one.
  Nor is a 'refunded' one whose job is no longer dead (retry_dead queued it again: it will be recharged
  and scored, or completed unpaid), read from its queue row, emq:{t}:job:<JOB> (ARGV[6] is that prefix:
  undeclared, in the same hash slot). The markers are read whole: at most one per dead-lettered guess of
  the round.

  The round leaves the live index (KEYS[13], where open_round.lua and schedule_round.lua put it) in the
  same step: codemojex.history.conclude_closed reads that index, so a round is concluded however many
  rounds were opened after it (a day's round beside the schedule's short ones).

  Once: the summary's field in KEYS[10] is written only if absent, and the 'closed' event, the history
  entries and the reveal only in that same step. Two workers, or a retry after a lost reply, find the
  summary and answer 0 with it, changing nothing: the event is on the stream once per round.

  The winners' display names are read from their player records, cmx:{t}:player:<PLR> (ARGV[4] is that
  prefix): undeclared keys, but in the same hash slot as every declared one (the {t} tag).

  Input:
    KEYS[1]  round     (hash)    cmx:{t}:round:<RND>
    KEYS[2]  secret    (string)  cmxs:{t}:secret:<RND>
    KEYS[3]  revealed  (string)  cmx:{t}:revealed:<RND>
    KEYS[4]  board     (zset)    cmx:{t}:board:<RND>, members in rank order (codemojex.ranking)
    KEYS[5]  events    (stream)  cmx:{t}:events:<RND>
    KEYS[6]  quota     (hash)    cmx:{t}:quota:<RND>, player -> guesses admitted
    KEYS[7]  scored    (zset)    cmx:{t}:scored:<RND>, the round's GES records
    KEYS[8]  charges   (hash)    cmx:{t}:charges:<RND>, JOB -> what it was charged (one per admission)
    KEYS[9]  refunds   (hash)    cmx:{t}:refunds:<RND>, JOB -> a dead guess's refund
    KEYS[10] summaries (hash)    cmx:{t}:summaries, RND -> summary (JSON)
    KEYS[11] history   (zset)    cmx:{t}:history, RND by close time
    KEYS[12] retained  (zset)    cmx:{t}:retained, RND by close time, until its per-guess data is purged
    KEYS[13] live      (zset)    cmx:{t}:live, rounds not concluded yet: the round leaves it here

    ARGV[1] round id
    ARGV[2] winners kept in the summary (int >= 1: the top of the final board)
    ARGV[3] events kept in the stream, about
    ARGV[4] player key prefix, 'cmx:{t}:player:'
    ARGV[5] grace (ms after the close during which queued guesses are waited for)
    ARGV[6] the bus's job key prefix, 'emq:{t}:job:'

  Output:
    { 1, summary }   concluded now
    { 0, summary }   concluded before (by another worker, or this call's lost first reply); nothing changed
                     but the round's live entry, dropped if still there (a round concluded before it)
    { 2, '' }        not closed yet; nothing changed
    { 3, pending }   closed, `pending` guesses still to score, within the grace; nothing changed
    {-1, '' }        no such round; nothing changed but a stale live entry of it, dropped
]]
local roundKey, secretKey, revealedKey, boardKey, eventsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local quotaKey, scoredKey, chargesKey, refundsKey = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local summariesKey, historyKey, retainedKey, liveKey = KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local roundId, top, eventsCap, playerPrefix, grace =
  ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local jobPrefix = ARGV[6]

-- @include "round_end"
-- @include "row"

local done = redis.call('HGET', summariesKey, roundId)
if done then
  redis.call('ZREM', liveKey, roundId)  -- no-op but for a round concluded before the live index
  return {0, done}
end
local row = redis.call('HMGET', roundKey, 'status', 'closes', 'closed', 'opens', 'keyboard', 'length')
if not row[1] then
  redis.call('ZREM', liveKey, roundId)  -- a stale entry: nothing to conclude
  return {-1, ''}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local closedAt = round_ended(row, now)
if not closedAt then
  return {2, ''}
end
local guesses = redis.call('ZCARD', scoredKey)
local settled = 0  -- refunded or completed unpaid (never scored); a 'recharged' one has its record
local markers = redis.call('HGETALL', refundsKey)  -- HVALS is not among the users' commands
for i = 2, #markers, 2 do
  if markers[i] == 'refunded' then  -- settled while dead (or forgotten); retried, it is queued again
    -- echomq's row: 's' state (absent while queued), 'l' lane (absent: no row, then its tombstone)
    local jobKey = jobPrefix .. markers[i - 1]
    local row = redis.call('HMGET', jobKey, 's', 'l')
    local state = row[2] and (row[1] or 'queued')
    if not row[2] then
      local tomb = tombstone_at(jobKey)
      state = tomb and tomb.state
    end
    if not state or state == 'dead' then settled = settled + 1 end
  elseif markers[i] ~= 'recharged' then
    settled = settled + 1
  end
end
local pending = redis.call('HLEN', chargesKey) - guesses - settled
if pending > 0 and now < closedAt + grace then return {3, pending} end

-- Read everything, then write.
local secret = redis.call('GET', secretKey)
local shown = redis.call('GET', revealedKey) or secret
local members = redis.call('ZRANGE', boardKey, 0, top - 1)
local board = {}
for i, member in ipairs(members) do
  local player = string.match(member, ':([^:]+)$')
  local name = player and redis.call('HGET', playerPrefix .. player, 'name') or false
  board[i] = {member, name or '?'}
end
local summary = cjson.encode({
  round_id = roundId,
  keyboard = cjson.decode(row[5]),
  length = tonumber(row[6]),
  secret = shown and cjson.decode(shown) or false,
  opens_ms = tonumber(row[4]),
  closes_ms = tonumber(row[2]),
  closed_ms = closedAt,
  players = redis.call('HLEN', quotaKey),
  guesses = guesses,
  board = board,
})

if row[1] ~= 'closed' then redis.call('HSET', roundKey, 'status', 'closed', 'closed', closedAt) end
if shown and not redis.call('GET', revealedKey) then redis.call('SET', revealedKey, shown) end
redis.call('HSET', summariesKey, roundId, summary)
redis.call('ZADD', historyKey, closedAt, roundId)
redis.call('ZADD', retainedKey, closedAt, roundId)
redis.call('ZREM', liveKey, roundId)
redis.call('XADD', eventsKey, 'MAXLEN', '~', eventsCap, '*', 'kind', 'closed', 'summary', summary)
return {1, summary}
