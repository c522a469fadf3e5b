-- When a round ended (codemojex.rounds.Round.status_at, on the server clock): the one rule that
-- conclude_round.lua and schedule_round.lua share.
--
-- round_ended(row, now): row is HMGET of the round hash's 'status', 'closes', 'closed'; the close time
-- (ms) if the round is closed (by a call: its 'closed'; by its clock: its 'closes', once past), else nil.
local function round_ended(row, now)
  if row[1] == 'closed' then
    return tonumber(row[3])
  elseif tonumber(row[2]) > 0 and tonumber(row[2]) <= now then
    return tonumber(row[2])
  end
  return nil
end
