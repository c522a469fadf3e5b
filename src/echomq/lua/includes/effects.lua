-- include "effects": an application's Redis writes, read from a flat program and checked whole against
-- the data before the first one runs (complete_effects.lua; echomq.effects builds the program).
--
-- A script's writes are not undone when a later command fails (WRONGTYPE, "not an integer", overflow),
-- so "every effect or none" needs every way a write could fail ruled out first. check_effects walks the
-- program against a model of each key as the program leaves it (its type, the counters it knows), with
-- reads only, and answers the reason of the first effect that would fail, or nil; apply_effects then runs
-- them, and none can fail. The model is conservative: a hash, set or zset that the program empties keeps
-- its type in the model, so a later effect of another type on that key is refused though Redis would take
-- it; nothing is ever let through that Redis would refuse.
--
-- The program: per effect its command, its key's position among the effect keys, its argument count,
-- then its arguments, as echomq.effects writes them:
--   SET value [PX ms]        DEL            PEXPIRE ms         INCRBY n
--   HSET field value ...     HDEL field ... HINCRBY field n
--   ZADD score member ...    ZINCRBY n member                  ZREM member ...
--   SADD member ...          SREM member ...                   RPUSH value ...      LPUSH value ...
--   XADD maxlen approximate(0|1) field value ...   (run as XADD key MAXLEN [~] maxlen * field value ...)
-- Counters (INCRBY, HINCRBY) stay within +-(2^53 - 1), integers a Lua number holds exactly: an effect
-- that would take one past it, or finds a value that is not such an integer, is refused.

local EFFECT_MAX_SAFE = 9007199254740991  -- 2^53 - 1

-- command -> { the key type it needs (nil: any), least arg count, arg count parity (2: even, 0: exact) }
local EFFECT_SHAPES = {
  SET = {nil, 1}, DEL = {nil, 0, 0}, PEXPIRE = {nil, 1, 0}, INCRBY = {'string', 1, 0},
  HSET = {'hash', 2, 2}, HDEL = {'hash', 1}, HINCRBY = {'hash', 2, 0},
  ZADD = {'zset', 2, 2}, ZINCRBY = {'zset', 2, 0}, ZREM = {'zset', 1},
  SADD = {'set', 1}, SREM = {'set', 1}, RPUSH = {'list', 1}, LPUSH = {'list', 1},
  XADD = {'stream', 4, 2},
}

-- The effects of a program in `argv` from position `first` on, `count` of them, on the keys `keys`
-- from position `keyBase` + 1 on: a list of { op, key, args }. Raises on a malformed program (nothing
-- has been written when it is read).
local function read_effects(argv, first, count, keys, keyBase)
  local effects, at = {}, first
  for _ = 1, count do
    local op, slot, argc = argv[at], tonumber(argv[at + 1]), tonumber(argv[at + 2])
    local shape = EFFECT_SHAPES[op]
    assert(shape and slot and argc, 'effects: malformed program at argument ' .. at)
    local key = keys[keyBase + slot]
    assert(key and string.sub(key, 1, 4) ~= 'emq:', 'effects: no such key, or a key of EchoMQ')
    local parity = shape[3] or 1
    assert(argc >= shape[2] and (parity ~= 0 or argc == shape[2]), 'effects: wrong arity of ' .. op)
    assert(parity ~= 2 or (argc - (op == 'XADD' and 2 or 0)) % 2 == 0, 'effects: odd arguments to ' .. op)
    local args = {}
    for i = 1, argc do args[i] = argv[at + 2 + i] end
    assert(op ~= 'SET' or argc == 1 or (argc == 3 and args[2] == 'PX'), 'effects: SET value [PX ms]')
    local count = (op == 'PEXPIRE' and args[1]) or (op == 'SET' and args[3]) or (op == 'XADD' and args[1])
    assert(not count or (#count <= 13 and string.match(count, '^[1-9]%d*$')), 'effects: ' .. op .. ' count')
    for i = 1, (op == 'ZADD' and argc or (op == 'ZINCRBY' and 1 or 0)), (op == 'ZADD' and 2 or 1) do
      local score = tonumber(args[i])
      assert(score and score == score and (op == 'ZADD' or math.abs(score) ~= math.huge), 'effects: ' .. op .. ' score')
    end
    effects[#effects + 1] = {op, key, args}
    at = at + 3 + argc
  end
  assert(argv[at] == nil, 'effects: arguments past the program')
  return effects
end

-- The integer `text` holds as Redis reads one (no sign '+', no leading zero, no space), within the safe
-- range; 0 for an absent value (false); nil for anything else.
local function effect_integer(text)
  if not text then return 0 end
  if type(text) == 'number' then return text end
  if #text > 17 or not (text == '0' or string.match(text, '^%-?[1-9]%d*$')) then return nil end
  local n = tonumber(text)
  if n > EFFECT_MAX_SAFE or n < -EFFECT_MAX_SAFE then return nil end
  return n
end

-- The model of `key`: { t = its type, fresh = true once the program replaced it whole, val = a string's
-- value once known, fields = a hash's known fields (false: absent) }.
local function effect_model(models, key)
  local m = models[key]
  if not m then
    m = {t = redis.call('TYPE', key)['ok'], fresh = false, fields = {}}
    models[key] = m
  end
  return m
end

-- The reason the stream at `key` can take no entry under '*' (its last id is the largest), or nil.
local function stream_exhausted(key)
  local info = redis.call('XINFO', 'STREAM', key)
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' and info[i + 1] == '18446744073709551615-18446744073709551615' then
      return 'the stream ' .. key .. ' has used its last id'
    end
  end
  return nil
end

-- Moves a counter `current` (nil: not an integer) by `by`: the new value, or nil and the reason.
local function effect_add(current, by, what)
  local step = effect_integer(by)
  if current == nil then return nil, what .. ' holds a value that is not an integer within +-(2^53 - 1)' end
  if step == nil then return nil, 'the increment of ' .. what .. ' is not an integer' end
  local after = current + step
  if after > EFFECT_MAX_SAFE or after < -EFFECT_MAX_SAFE then
    return nil, what .. ' would leave +-(2^53 - 1)'
  end
  return after
end

-- nil when every effect can apply to the data as it is (reads only), else the first refusal's reason.
local function check_effects(effects)
  local models = {}
  for _, effect in ipairs(effects) do
    local op, key, args = effect[1], effect[2], effect[3]
    local m = effect_model(models, key)
    local need = EFFECT_SHAPES[op][1]
    if need and m.t ~= 'none' and m.t ~= need then
      return op .. ' on ' .. key .. ': it holds a ' .. m.t .. ', not a ' .. need
    end
    if op == 'SET' then
      m.t, m.fresh, m.val, m.fields = 'string', true, args[1], {}
    elseif op == 'DEL' then
      m.t, m.fresh, m.val, m.fields = 'none', true, nil, {}
    elseif op == 'INCRBY' then
      if m.t == 'none' then m.val = false elseif m.val == nil then m.val = redis.call('GET', key) end
      local after, why = effect_add(effect_integer(m.val), args[1], key)
      if not after then return 'INCRBY: ' .. why end
      m.t, m.val = 'string', after
    elseif op == 'HINCRBY' then
      local field = args[1]
      local v = m.fields[field]
      if v == nil then
        v = false
        if m.t ~= 'none' and not m.fresh then v = redis.call('HGET', key, field) end
      end
      local after, why = effect_add(effect_integer(v), args[2], 'field ' .. field .. ' of ' .. key)
      if not after then return 'HINCRBY: ' .. why end
      m.t, m.fields[field] = 'hash', after
    elseif op == 'HSET' or op == 'HDEL' then
      for i = 1, #args, (op == 'HSET' and 2 or 1) do
        m.fields[args[i]] = (op == 'HSET') and args[i + 1]
      end
      if op == 'HSET' then m.t = 'hash' end
    elseif op == 'XADD' then
      if m.t == 'stream' and not m.fresh and not m.checked then
        local why = stream_exhausted(key)
        if why then return 'XADD: ' .. why end
        m.checked = true
      end
      m.t = 'stream'
    elseif need and op ~= 'ZREM' and op ~= 'SREM' then  -- ZADD ZINCRBY SADD RPUSH LPUSH make the key
      m.t = need
    end
  end
  return nil
end

-- Run the effects (check_effects said they can all apply).
local function apply_effects(effects)
  for _, effect in ipairs(effects) do
    local op, key, args = effect[1], effect[2], effect[3]
    if op == 'XADD' then
      local cap = {'XADD', key, 'MAXLEN'}
      if args[2] == '1' then cap[#cap + 1] = '~' end
      cap[#cap + 1] = args[1]
      cap[#cap + 1] = '*'
      for i = 3, #args do cap[#cap + 1] = args[i] end
      redis.call(unpack(cap))
    else
      redis.call(op, key, unpack(args))
    end
  end
end
