"""Every Redis key of a game is built here, and only here.

A game on the bus with tag ``cm`` lives under ``cmx:{cm}:``, beside the bus's ``emq:{cm}:``. The braces
are the same Redis Cluster hash tag, so every game key and every queue key of one bus hash to one slot,
and one script can touch both: ``submit.lua`` charges the wallet and admits the job in one step, and
``score.lua`` writes the guess record and completes the job in one step. Builders check the ids they are
given and raise :class:`~codemojex.errors.InvalidId`, so no key is ever built from unchecked input.

==========================  ======  ==========================================================
key                         type    holds
==========================  ======  ==========================================================
``rounds``                  zset    every round id, scored by its open time (ms)
``round:<RND>``             hash    keyboard, length, prices, opens/closes, max guesses, status
``revealed:<RND>``          string  the six keys (JSON), copied from the secret once the round closed
``player:<PLR>``            hash    name, created, name skeleton, token digest, recovery digest
``players``                 zset    every player id, scored by registration time
``trial``                   zset    players with no admitted guess yet, by when their trial ends (ms)
``wallet:<PLR>``            hash    currency -> balance (never negative)
``ledger:<PLR>``            list    append-only entries (JSON): currency, delta, balance, reason, job, op
``credits:<PLR>``           hash    OPR -> ``currency amount balance``: each credit's operation, once
``quota:<RND>``             hash    player -> guesses admitted in the round
``submitted:<RND>:<PLR>``   zset    the player's admitted JOB ids, scored by admission time
``charges:<RND>``           hash    JOB -> ``currency=amount`` it was charged
``refunds:<RND>``           hash    JOB -> ``refunded`` / ``recharged`` / ``unpaid`` (a dead guess's refund)
``allowances:<RND>``        hash    player -> the JOB whose admission took the round's allowance (once)
``rewards:<RND>``           hash    player -> the JOB whose score rewarded the solve (once)
``refund_checkpoint``       string  dead-set time (ms) up to which the refund pass has looked
``guess:<GES>``             hash    the scored guess record (GES = the JOB's body under ``GES``)
``scored:<RND>``            zset    every GES of the round at score 0: id order, i.e. admission order
``played:<RND>:<PLR>``      zset    the player's GES in the round at score 0: the order their standing folds
``standing:<RND>``          hash    player -> their leaderboard member (see codemojex.ranking)
``board:<RND>``             zset    the leaderboard: members at score 0, in rank order by bytes
``results:<PLR>``           hash    RND -> attempts to solve, 0 unsolved, latest rounds; older ones folded
``proven:<RND>:<PLR>``      hash    position -> the key a scored guess proved a hit there
``locks:<RND>:<PLR>``       hash    position -> key the player locked (a proven hit)
``events:<RND>``            stream  scored guesses and board changes, capped, for live pages
``token:<D>``               string  the player id an API token names (D: its SHA-256 hex); PX lifetime
``rotated:<D>``             string  a rotated token's successor, sealed (replays a lost rotation reply)
``sessions:<PLR>``          zset    the player's tokens traded for a recovery code: digest -> end (ms)
``recovery:<D>``            string  the player a recovery code names (D: its SHA-256 hex); no TTL
``tokens``                  hash    legacy (before token keys): SHA-256 of a token -> player id; read
``names``                   hash    a display name's skeleton (codemojex.names) -> the player holding it
``latency``                 hash    submit->scored latency histogram: bucket -> count, count, sum_ms
``idempotency:<PLR>:<H>``   hash    an Idempotency-Key (H: its SHA-256) -> the JOB it named, digest
``fault:<JOB>``             string  a one-shot fault trigger for that job (the proof's crash, demo game only)
``bucket:<C>:<a|p>:<D>``    string  a rate limit's bucket (admit.lua): class C, address/player digest D
``ticket:<D>``              string  a stream ticket (D: its SHA-256) -> ``player round T`` (T: the token's)
``round_settings``          hash    the schedule and retention serve set (codemojex.schedule)
``schedule``                hash    the schedule's state: ``slot`` (rounds it opened) and ``round`` (the last)
``summaries``               hash    RND -> a closed round's compact summary (JSON), kept for good
``history``                 zset    every concluded round id, scored by its close time (ms)
``whole_summaries``         hash    a spread game's home partition: RND -> the whole game's summary
``whole_history``           zset    a spread game's home partition: the whole game's concluded rounds
``retained``                zset    concluded rounds whose per-guess data is still kept, by close time
``live``                    zset    rounds not concluded yet (open, opening later, or closed and waiting
                                    for their conclusion), by open time: what the conclusion pass and the
                                    lobby read, however many rounds were opened since
==========================  ======  ==========================================================

One key lives outside ``cmx:{cm}:``: a round's secret, ``cmxs:{cm}:secret:<RND>`` (string, the six keys
as JSON), read and written only by the processes that may (the score worker, the operator's tools; see
:mod:`codemojex.access`). Redis ACL key patterns are allow-lists, so the web host's user, allowed
``cmx:{cm}:*`` and ``emq:{cm}:*``, gets NOPERM on it; the same ``{cm}`` hash tag keeps it in the slot of
the bus, so one script still touches it with the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from codemojex.errors import InvalidId
from echomq import ids
from echomq.errors import InvalidId as BusInvalidId
from echomq.keyspace import check_tag

ROUND = "RND"
PLAYER = "PLR"
GUESS = "GES"
JOB = "JOB"
OPERATION = "OPR"  # names one call that must apply once however often it is retried (a credit, a close)


_HEX64 = re.compile(r"[0-9a-f]{64}")


def check_digest(value: object) -> str:
    """Return ``value`` if it is a SHA-256 hex digest (64 lower-case hex digits), else raise InvalidId."""
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise InvalidId(f"a digest is 64 lower-case hex digits, got {value!r}")
    return value


def check_id(value: object, brand: str) -> str:
    """Return ``value`` if it is a well-formed id of ``brand``, else raise :class:`InvalidId`."""
    try:
        return ids.check(value, brand)
    except BusInvalidId as exc:
        raise InvalidId(str(exc)) from None


def guess_of(job_id: str) -> str:
    """The GES id of a guess job: the JOB's body under the ``GES`` brand."""
    return ids.rebrand(check_id(job_id, JOB), GUESS)


@dataclass(frozen=True, slots=True)
class GameKeys:
    """The game keys beside the bus with ``tag``."""

    tag: str
    prefix: str = field(init=False)

    def __post_init__(self) -> None:
        check_tag(self.tag)
        object.__setattr__(self, "prefix", f"cmx:{{{self.tag}}}:")

    @property
    def rounds(self) -> str:
        return f"{self.prefix}rounds"

    @property
    def players(self) -> str:
        return f"{self.prefix}players"

    def round(self, round_id: str) -> str:
        return f"{self.prefix}round:{check_id(round_id, ROUND)}"

    @property
    def secret_prefix(self) -> str:
        """What every secret key starts with (outside :attr:`prefix`, see the module doc)."""
        return f"cmxs:{{{self.tag}}}:"

    def secret(self, round_id: str) -> str:
        return f"{self.secret_prefix}secret:{check_id(round_id, ROUND)}"

    def revealed(self, round_id: str) -> str:
        return f"{self.prefix}revealed:{check_id(round_id, ROUND)}"

    def player(self, player_id: str) -> str:
        return f"{self.prefix}player:{check_id(player_id, PLAYER)}"

    def wallet(self, player_id: str) -> str:
        return f"{self.prefix}wallet:{check_id(player_id, PLAYER)}"

    def ledger(self, player_id: str) -> str:
        return f"{self.prefix}ledger:{check_id(player_id, PLAYER)}"

    def credits(self, player_id: str) -> str:
        return f"{self.prefix}credits:{check_id(player_id, PLAYER)}"

    def quota(self, round_id: str) -> str:
        return f"{self.prefix}quota:{check_id(round_id, ROUND)}"

    def submitted(self, round_id: str, player_id: str) -> str:
        return f"{self.prefix}submitted:{check_id(round_id, ROUND)}:{check_id(player_id, PLAYER)}"

    def charges(self, round_id: str) -> str:
        return f"{self.prefix}charges:{check_id(round_id, ROUND)}"

    def refunds(self, round_id: str) -> str:
        return f"{self.prefix}refunds:{check_id(round_id, ROUND)}"

    def allowances(self, round_id: str) -> str:
        return f"{self.prefix}allowances:{check_id(round_id, ROUND)}"

    def rewards(self, round_id: str) -> str:
        return f"{self.prefix}rewards:{check_id(round_id, ROUND)}"

    @property
    def refund_checkpoint(self) -> str:
        return f"{self.prefix}refund_checkpoint"

    def guess(self, guess_id: str) -> str:
        return f"{self.prefix}guess:{check_id(guess_id, GUESS)}"

    def scored(self, round_id: str) -> str:
        return f"{self.prefix}scored:{check_id(round_id, ROUND)}"

    def played(self, round_id: str, player_id: str) -> str:
        return f"{self.prefix}played:{check_id(round_id, ROUND)}:{check_id(player_id, PLAYER)}"

    def standing(self, round_id: str) -> str:
        return f"{self.prefix}standing:{check_id(round_id, ROUND)}"

    def board(self, round_id: str) -> str:
        return f"{self.prefix}board:{check_id(round_id, ROUND)}"

    def results(self, player_id: str) -> str:
        return f"{self.prefix}results:{check_id(player_id, PLAYER)}"

    def proven(self, round_id: str, player_id: str) -> str:
        return f"{self.prefix}proven:{check_id(round_id, ROUND)}:{check_id(player_id, PLAYER)}"

    def locks(self, round_id: str, player_id: str) -> str:
        return f"{self.prefix}locks:{check_id(round_id, ROUND)}:{check_id(player_id, PLAYER)}"

    def events(self, round_id: str) -> str:
        return f"{self.prefix}events:{check_id(round_id, ROUND)}"

    @property
    def tokens(self) -> str:
        return f"{self.prefix}tokens"

    def token(self, digest: str) -> str:
        return f"{self.prefix}token:{check_digest(digest)}"

    def rotated(self, digest: str) -> str:
        return f"{self.prefix}rotated:{check_digest(digest)}"

    def sessions(self, player_id: str) -> str:
        return f"{self.prefix}sessions:{check_id(player_id, PLAYER)}"

    def recovery(self, digest: str) -> str:
        return f"{self.prefix}recovery:{check_digest(digest)}"

    @property
    def trial(self) -> str:
        return f"{self.prefix}trial"

    @property
    def names(self) -> str:
        return f"{self.prefix}names"

    @property
    def latency(self) -> str:
        return f"{self.prefix}latency"

    def idempotency(self, player_id: str, key_digest: str) -> str:
        return f"{self.prefix}idempotency:{check_id(player_id, PLAYER)}:{check_digest(key_digest)}"

    def fault(self, job_id: str) -> str:
        return f"{self.prefix}fault:{check_id(job_id, JOB)}"

    def bucket(self, kind: str, scope: str, digest: str) -> str:
        """A rate-limit bucket: ``kind`` a request class (a-z), ``scope`` ``a`` (address) or ``p`` (player),
        ``digest`` the SHA-256 of the address or token."""
        if not re.fullmatch(r"[a-z]{1,16}", kind) or scope not in ("a", "p"):
            raise InvalidId(f"a bucket is a class a-z and a or p, got {kind!r} {scope!r}")
        return f"{self.prefix}bucket:{kind}:{scope}:{check_digest(digest)}"

    def player_buckets(self, kind: str) -> str:
        """The prefix of a player's rate-limit buckets of class ``kind``: ``admit.lua`` appends the player
        id the token names (``bucket:<kind>:u:<PLR>``), so a rotated token keeps its player's bucket."""
        if not re.fullmatch(r"[a-z]{1,16}", kind):
            raise InvalidId(f"a bucket class is a-z, got {kind!r}")
        return f"{self.prefix}bucket:{kind}:u:"

    def ticket(self, digest: str) -> str:
        return f"{self.prefix}ticket:{check_digest(digest)}"

    @property
    def round_settings(self) -> str:
        return f"{self.prefix}round_settings"

    @property
    def schedule(self) -> str:
        return f"{self.prefix}schedule"

    @property
    def summaries(self) -> str:
        return f"{self.prefix}summaries"

    @property
    def history(self) -> str:
        return f"{self.prefix}history"

    @property
    def whole_summaries(self) -> str:
        """A spread game's summaries of its rounds, the whole game's (in its home partition)."""
        return f"{self.prefix}whole_summaries"

    @property
    def whole_history(self) -> str:
        return f"{self.prefix}whole_history"

    @property
    def retained(self) -> str:
        return f"{self.prefix}retained"

    @property
    def live(self) -> str:
        return f"{self.prefix}live"

    @property
    def pattern(self) -> str:
        """A SCAN pattern matching every game key (for inspection and tests)."""
        return f"cmx:{{{self.tag}}}:*"
