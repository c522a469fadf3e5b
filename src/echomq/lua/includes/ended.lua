-- include "ended": how recent claims of a job ended, so a retried finishing call answers truthfully.
--
-- A row's 'ended' field lists the last few claims that fail or release ended, newest first, as
-- '<token><how>' words: 'q' fail sent it back (queued or delayed), 'x' fail dead-lettered it, 'r' release
-- gave it back. Only the call that ended claim <token> writes its word, so a word for a token proves that
-- this very claim's call landed; a retry of that call (its reply was lost) reads it instead of answering
-- stale. A completion needs no word: a row that is done under the token says it.

local ENDED_KEPT = 4  -- words kept: a retry is told the truth unless this many later claims ended first

-- Record that claim `token` ended `how` ('q', 'x' or 'r').
local function note_ended(jobKey, token, how)
  local words = {token .. how}
  for word in string.gmatch(redis.call('HGET', jobKey, 'ended') or '', '%S+') do
    if #words >= ENDED_KEPT then break end
    words[#words + 1] = word
  end
  redis.call('HSET', jobKey, 'ended', table.concat(words, ' '))
end

-- How claim `token` ended ('q', 'x' or 'r'), or nil when no fail or release of that claim is recorded.
local function ended_as(jobKey, token)
  for word in string.gmatch(redis.call('HGET', jobKey, 'ended') or '', '%S+') do
    local t, how = string.match(word, '^(%d+)(%a)$')
    if t == token then return how end
  end
  return nil
end
