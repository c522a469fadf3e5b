-- include "slot": never start a change that a slot being resharded would stop halfway.
--
-- What Redis does (7.0 and 6.2 alike; tests/integration/test_cluster_migration.py runs on both) while a
-- slot moves key by key, MIGRATING on its source and IMPORTING on its target:
--   * The EVAL itself runs only where every declared key is: the source answers ASK when it holds none
--     of them (7.0: TRYAGAIN when it holds some), the target after ASKING answers TRYAGAIN when it lacks
--     one of several. So a script's declared keys all exist when it starts.
--   * Inside the script every redis.call is checked again, each on its own: on the source, a command on
--     a key this node does not hold (moved away, or simply absent, or emptied by this very script) fails
--     the script with "non local key"; on the target after ASKING, a one-key command on an absent key is
--     served as if the key were empty (it may still be on the source), a several-key one fails. The
--     writes before a failure stay: a script is not rolled back.
-- So a script that builds a key it was not given (the lane the ring names, the job a lane holds, a
-- job's lane) first asks slot_moving(); while it is true, it touches such a key only after here(key),
-- and always before the first write of the step, and it never touches again a declared key that it
-- may have emptied. A step that finds a key elsewhere changes nothing; earlier steps stay whole.

-- True while this bus's slot is being migrated to or from this node (then two absent keys of the slot
-- read together are refused on either side); false on a stable slot or a server without cluster mode.
local function slot_moving(prefix)
  local probe = redis.pcall('EXISTS', prefix .. 'slot-probe:1', prefix .. 'slot-probe:2')
  return type(probe) == 'table'
end

-- Does this node hold `key` now? (The source refuses a key it lacks; pcall makes that false.)
local function here(key)
  return redis.pcall('EXISTS', key) == 1
end
