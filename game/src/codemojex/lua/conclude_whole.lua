--[[
  conclude_whole: write a spread game's summary of a round, the whole game's, in its home partition:
  once.

  Called by codemojex.spread_upkeep.conclude_round once every partition concluded its own part of the
  round (conclude_round.lua in each: its own players, counts and top of its board); the caller merges
  those parts (the boards k-way by codemojex.ranking's order, the counts summed) into `summary`. The
  home partition keeps it apart from its own part (KEYS[1] and KEYS[2] are the whole game's summaries
  and history, beside the partition's own `summaries` and `history`), lists it, and announces it on the
  home partition's event stream of the round as one 'concluded' entry, which the web host's events hub
  sends as the round's `closed` event.

  Once: the summary's field in KEYS[1] is written only if absent, and the history entry and the event
  only in that same step. Two workers, or a retry after a lost reply, find the summary and answer 0
  with it, changing nothing.

  Input:
    KEYS[1] whole summaries (hash)    cmx:{t.0}:whole_summaries, RND -> summary (JSON)
    KEYS[2] whole history   (zset)    cmx:{t.0}:whole_history, RND by close time
    KEYS[3] events          (stream)  cmx:{t.0}:events:<RND>

    ARGV[1] round id
    ARGV[2] summary (JSON, codemojex.history's form)
    ARGV[3] close time (ms)
    ARGV[4] events kept in the stream, about

  Output:
    { 1, summary }   written now
    { 0, summary }   written before; nothing changed
]]
local summariesKey, historyKey, eventsKey = KEYS[1], KEYS[2], KEYS[3]
local roundId, summary, closedAt, eventsCap = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

local done = redis.call('HGET', summariesKey, roundId)
if done then
  return {0, done}
end
redis.call('HSET', summariesKey, roundId, summary)
redis.call('ZADD', historyKey, closedAt, roundId)
redis.call('XADD', eventsKey, 'MAXLEN', '~', eventsCap, '*', 'kind', 'concluded', 'summary', summary)
return {1, summary}
