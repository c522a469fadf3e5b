--[[
  rebuild_board: replace a round's standings and board with the ones its records fold to, in one step.

  Called by codemojex.leaderboard.rebuild, an operator's tool (`codemojex board RND --rebuild`): it
  reads the round's scored records, folds them (codemojex.leaderboard.fold_records) and spells each
  standing as a member of the current rule (codemojex.ranking.board_member), e.g. after an upgrade that
  changed the rule, whose old members misorder. Fenced on the records it read: if the round's scored set
  no longer holds that many records (a guess was scored since), nothing changes and the caller reads
  again. Records are only ever added, so an equal count is the same set.

  The new members are added before the stale ones are removed, so the board is never emptied mid-script
  (see echomq's include "slot"). Its commands are among codemojex.access.DATA (the operator's user runs
  it).

  Input:
    KEYS[1] standing (hash)  player -> leaderboard member
    KEYS[2] board    (zset)  members at score 0, in rank order
    KEYS[3] scored   (zset)  the round's GES ids at score 0

    ARGV[1] the number of records the caller folded (ZCARD of scored when it read them)
    ARGV[2] JSON list of [player, member] pairs: every standing of the fold

  Output:
    { 1, n }  rewritten: n players on the board; members and standings of anyone else removed
    { 0, n }  the round has n records now, not ARGV[1]: nothing changed
]]
local standingKey, boardKey, scoredKey = KEYS[1], KEYS[2], KEYS[3]
local expected, entries = tonumber(ARGV[1]), cjson.decode(ARGV[2])

local count = redis.call('ZCARD', scoredKey)
if count ~= expected then return {0, count} end

local keep, players = {}, {}
for _, pair in ipairs(entries) do
  local player, member = pair[1], pair[2]
  keep[member], players[player] = true, true
  redis.call('ZADD', boardKey, 0, member)
  redis.call('HSET', standingKey, player, member)
end
for _, member in ipairs(redis.call('ZRANGE', boardKey, 0, -1)) do
  if not keep[member] then redis.call('ZREM', boardKey, member) end
end
local stored = redis.call('HGETALL', standingKey)  -- player, member, ...
for i = 1, #stored, 2 do
  if not players[stored[i]] then redis.call('HDEL', standingKey, stored[i]) end
end
return {1, #entries}
