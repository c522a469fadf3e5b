--[[
  submit: admit a guess job once, charging the player's wallet in the same atomic step.

  Called by codemojex.guesses.submit. A JOB whose row is gone but whose game records remain is refused
  as used (below). If the JOB has a row the script changes nothing but the counter:
  duplicate (same lane and request digest, the original charge and payload are reported) or conflict
  (anything else differs). The digest (ARGV[7]) is of the request as the client sent it (round, player,
  the guess before the player's locks are overlaid), so a retry is a duplicate even if the locks changed
  since; an empty payload asks only for that answer (the retried guess no longer parses against today's
  locks): with no row it is refused as bad_guess. Otherwise it checks the player, the round (open on the server clock), the player's standing
  (not solved), the round's guess limit and the player's queue, picks the first currency of the round's
  price list the wallet can pay, debits it with a ledger entry naming the JOB, and admits the job on the
  player's lane. The first admission takes the player off trial (KEYS[17]): they are kept for good
  (expire.lua deletes only players on trial). A refusal changes nothing: no charge without an admission, no admission without a charge.

  The economy's allowance (codemojex.economy): the player's first admitted guess of the round first
  tops each currency of ARGV[9] up to its level (never lowering one above it), with one ledger entry
  'allowance' per currency raised (naming the round), and marks the round's allowance taken (KEYS[18],
  player -> this JOB), all in the same atomic step; the price is chosen from the topped-up balances. So
  the allowance is taken once per (player, round): a retry is a duplicate before this point, concurrent
  first guesses are serialized and the second finds the marker, and a refusal takes nothing.

  The ledger's bound (lua/includes/ledger.lua, codemojex.wallet): an admission that finds the ledger
  holding ARGV[10] entries or more first keeps its newest half, after one 'carry' entry per currency
  dropped, so replaying it from zero still gives every balance; then appends. A duplicate or a refusal
  never trims (it returns before), and a trim drops only entries whose effect a carry holds.

  Input:
    KEYS[1]  job       (hash)   emq:{t}:job:<JOB>
    KEYS[2]  lane      (zset)   emq:{t}:lane:<PLR>, the player's lane
    KEYS[3]  ring      (list)   serviceable lanes
    KEYS[4]  delayed   (zset)   scheduled ids (unused by guesses; admit_new takes it)
    KEYS[5]  wake      (list)   wake-up tokens
    KEYS[6]  stats     (hash)   queue counters
    KEYS[7]  waiting   (hash)   lane -> claim serial (fairness lag)
    KEYS[8]  round     (hash)   cmx:{t}:round:<RND>
    KEYS[9]  player    (hash)   cmx:{t}:player:<PLR>
    KEYS[10] wallet    (hash)   currency -> balance
    KEYS[11] ledger    (list)   append-only JSON entries
    KEYS[12] quota     (hash)   player -> guesses admitted in the round
    KEYS[13] submitted (zset)   the player's admitted JOB ids in the round
    KEYS[14] charges   (hash)   JOB -> 'currency=amount'
    KEYS[15] standing  (hash)   player -> leaderboard member (first byte '0' = solved)
    KEYS[16] guess     (hash)   cmx:{t}:guess:<GES>, the JOB's scored record (read only: reuse check)
    KEYS[17] trial     (zset)   players with no admitted guess yet (codemojex.trials)
    KEYS[18] allowances (hash)  cmx:{t}:allowances:<RND>, player -> the JOB that took the round's allowance

    ARGV[1] job id
    ARGV[2] player id (also the lane's name)
    ARGV[3] payload (canonical JSON of round, player and guess)
    ARGV[4] max attempts of the job
    ARGV[5] wake cap
    ARGV[6] most guesses a player may have queued at once
    ARGV[7] request digest (hex): the admission's identity, stored as the row's digest (its first 8
            bytes, field 'g'; echomq's include "row"), with the admission time (field 'w', ms)
    ARGV[8] round id (named in the charge's ledger entry, so a refund finds the charge whatever the payload)
    ARGV[9] the allowance's levels ('ticket=3;coin=50'; '' for none)
    ARGV[10] the ledger's cap (GameSettings.ledger_kept, >= 10)

  Output:
    { 1, state, charge }  admitted and charged; charge is 'currency=amount'
    { 0, state, charge, payload }  duplicate; nothing changed; charge is the original one, payload the
                          admitted one ('' once the row is trimmed to a tombstone)
    {-1, state }          conflict: the id exists with another lane or request digest; nothing changed
    {-1, 'used' }         the id has no row but was used before: its GES record exists, or it was charged
                          in this round (charges:<RND>; a refund marker implies the charge). The bus forgets
                          a job id one dedup window (done) or dead_ttl (dead) after its finish, the game
                          never does: admitting it anew would charge again for a guess scored, or (via
                          score.lua's recharge of a refunded one) charge it twice. Nothing changed.
    {-3, reason }         refused, nothing changed; reason: unknown_player, unknown_round, round_closed,
                          round_not_open, already_solved, max_guesses, too_many_queued, insufficient_funds,
                          bad_guess (empty payload and no row)
]]
local jobKey, laneKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local roundKey, playerKey, walletKey, ledgerKey, quotaKey, submittedKey, chargesKey, standingKey =
  KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15]
local guessKey, trialKey, allowancesKey = KEYS[16], KEYS[17], KEYS[18]
local jobId, playerId, payload = ARGV[1], ARGV[2], ARGV[3]
local maxAttempts, wakeCap, maxQueued = ARGV[4], ARGV[5], ARGV[6]
local digest, roundId, allowance, ledgerCap = ARGV[7], ARGV[8], ARGV[9], ARGV[10]

-- The admission itself, shared with post_guess.lua (the host's one-call guess POST).
-- @include "admit_guess"

return admit_guess(
  {jobKey, laneKey, ringKey, delayedKey, wakeKey, statsKey, waitingKey, roundKey, playerKey, walletKey,
    ledgerKey, quotaKey, submittedKey, chargesKey, standingKey, guessKey, trialKey, allowancesKey},
  {jobId, playerId, payload, maxAttempts, wakeCap, maxQueued, digest, roundId, allowance, ledgerCap})
