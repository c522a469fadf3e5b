-- include "ended": how recent claims of a job ended, so a retried finishing call answers truthfully.
--
-- A row's 'n' (ended) field lists the last few claims that fail or release ended, newest first, as
-- '<token><how><request>' words: 'q' fail sent it back (queued or delayed), 'x' fail dead-lettered it, 'r'
-- release gave it back; <request> is the request id the ending call named ('' for none). Only the call
-- that ended claim <token> writes its word, so a word for a token (and request) proves that this very
-- claim's call landed; a retry of that call (its reply was lost) reads it instead of answering stale. A
-- completion needs no word: a row that is done under the token (and request) says it.
--
-- Why the request: a row admitted anew (its id finished, trimmed, forgotten) starts with no words, but
-- its tokens restart at 0, so its own claims write words under the tokens of the earlier life's claims.
-- A call of an earlier life's claim that names its request finds no word of that request and is told
-- stale, not the new life's ending. A call without a request id matches any word of its token.

local ENDED_KEPT = 4  -- words kept: a retry is told the truth unless this many later claims ended first

-- Record that claim `token` of the claim call `request` ('' for none) ended `how` ('q', 'x' or 'r').
local function note_ended(jobKey, token, request, how)
  local words = {token .. how .. request}
  for word in string.gmatch(redis.call('HGET', jobKey, 'n') or '', '%S+') do
    if #words >= ENDED_KEPT then break end
    words[#words + 1] = word
  end
  redis.call('HSET', jobKey, 'n', table.concat(words, ' '))
end

-- How claim `token` of the claim call `request` ended ('q', 'x' or 'r'), or nil when no fail or release
-- of that claim is recorded. An empty `request` matches the token's latest word, whatever its request.
local function ended_as(jobKey, token, request)
  for word in string.gmatch(redis.call('HGET', jobKey, 'n') or '', '%S+') do
    local t, how, by = string.match(word, '^(%d+)(%a)(.*)$')
    if t == token and (request == '' or by == request) then return how end
  end
  return nil
end
