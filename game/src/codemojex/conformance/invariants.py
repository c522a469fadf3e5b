"""The invariants a conformance run checks at its end, from Redis state and from the run's history.

Each check returns the violations it found (empty when it holds), so a report can list every broken
promise at once instead of stopping at the first:

* :func:`echomq.testing.invariants.queue_structure` (re-exported): every job row is in exactly one location,
  the one its state names; a lane is in the ring iff it holds a job, once; the fairness clock has a field
  for exactly the ring's lanes.
* :func:`exactly_once`: every admitted guess has one GES record, at most one ``scored`` event (the stream
  is capped), one observation in the latency histogram (``score.lua`` counts each effect it applies), and
  is counted once in its player's attempts; nothing is lost (every admitted job is done, or dead with a
  reason, or done unscored as ``unpaid`` after a refund its wallet could not pay back).
* :func:`wallets`: every ledger reconciles with its balances, and each admitted guess was charged once,
  refunded at most once and only when dead (given the rows: a refunded job is dead now, or was retried
  and then recharged and scored, or completed unpaid), recharged at most once and only after its
  refund: its net charge is its price when it is scored and nothing when it is refunded and unscored.
  A ledger trimmed to its bound (headed by ``carry`` entries, :mod:`codemojex.wallet`) is checked so for
  the jobs whose charge it kept; one trimmed away is not missing.
* :func:`economy`: the economy's credits (:mod:`codemojex.economy`) of the round: at most one
  ``allowance`` entry per currency per player, only with the round's marker, naming a job the player had
  admitted, and each raising its balance exactly to the allowance's level (topped up, never added); at
  most one ``reward`` entry per currency, only for a solved player and with its marker, of the reward's
  amount; and, given the game's settings, every admitted player took the allowance and every solved
  player was rewarded. With :func:`wallets` (balances = ledger replay) each credit is once per (player,
  round), whatever the retries, faults and delivery order.
* :func:`leaderboard`: the board equals the ranking recomputed from the GES records in admission order
  (:func:`codemojex.leaderboard.fold_records`), each player's stored standing is their fold, and each
  record's ``attempt`` and ``counted`` are the ones that fold gives it: a pure function of the admitted
  guesses, whatever order the faults delivered them in; so is each player's result in the round kept for
  their stats (``results:<PLR>``: attempts to solve, 0 unsolved; no entry without a scored guess).
* :func:`dead_unhandled`: no job is dead-lettered unless a handler ran it (the workers' handler starts,
  :mod:`.starts`), or the worker that held it last died or was stopped by a fault: a claim whose reply
  was lost must not spend a job's last try.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from codemojex import ranking, wallet
from codemojex.conformance.credits import economy
from codemojex.conformance.starts import Starts
from codemojex.guesses import GuessRecord, record_from_row
from codemojex.keys import GameKeys, guess_of
from codemojex.leaderboard import fold_records
from codemojex.wallet import Wallet, reconcile
from echomq.testing.invariants import job_rows, queue_structure

# A blocking redis.Redis (decode_responses=False): its stubs type replies too loosely to index.
Client = Any

__all__ = [
    "Client",
    "GameState",
    "dead_unhandled",
    "economy",
    "exactly_once",
    "job_rows",
    "leaderboard",
    "queue_structure",
    "read_game",
    "wallets",
]


@dataclass(frozen=True, slots=True)
class GameState:
    """What the game's keys of one round hold, read once for the checks."""

    records: dict[str, GuessRecord]  # GES id -> record
    scored_events: Counter[str]  # JOB id -> "scored" events naming it
    standings: dict[str, ranking.Standing]
    board: list[str]  # members in rank order
    submitted: dict[str, set[str]]  # player -> JOB ids admitted (the host's own index)
    observed: int  # effects score.lua applied (its latency histogram's count: one per record written)
    refunds: dict[str, str] = field(default_factory=dict)  # JOB -> refunded | recharged | unpaid
    results: dict[str, int] = field(default_factory=dict)  # player -> their stats' result in the round


def read_game(client: Client, keys: GameKeys, round_id: str, players: Iterable[str]) -> GameState:
    records = {}
    for raw in client.zrange(keys.scored(round_id), 0, -1):
        guess_id = raw.decode()
        row = client.hgetall(keys.guess(guess_id))
        if row:
            records[guess_id] = record_from_row(guess_id, row)
    events: Counter[str] = Counter()
    for _, fields in client.xrange(keys.events(round_id)):
        if fields.get(b"kind") == b"scored":
            events[fields[b"job"].decode()] += 1
    standings = {
        player.decode(): ranking.parse_board_member(member.decode())
        for player, member in client.hgetall(keys.standing(round_id)).items()
    }
    board = [member.decode() for member in client.zrange(keys.board(round_id), 0, -1)]
    submitted = {
        player: {raw.decode() for raw in client.zrange(keys.submitted(round_id, player), 0, -1)}
        for player in players
    }
    observed = int(client.hget(keys.latency, "count") or 0)
    refunds = {job.decode(): mark.decode() for job, mark in client.hgetall(keys.refunds(round_id)).items()}
    results = {}
    for player in sorted(set(submitted) | set(standings)):
        result = client.hget(keys.results(player), round_id)
        if result is not None:
            results[player] = int(result)
    return GameState(records, events, standings, board, submitted, observed, refunds, results)


def exactly_once(
    state: GameState, rows: dict[str, dict[str, str]], acknowledged: set[str]
) -> tuple[list[str], dict[str, int]]:
    """Violations, and the figures: ``lost`` (acknowledged, in Redis, neither scored nor dead),
    ``double`` (scored events or counted attempts beyond one), ``dead``, ``vanished`` (acknowledged but
    no longer in Redis at all: what a crash of an ``everysec`` server can lose)."""
    problems: list[str] = []
    admitted = set().union(*state.submitted.values()) if state.submitted else set()
    lost = double = dead = vanished = 0
    for job in sorted(acknowledged | admitted):
        row = rows.get(job)
        record = state.records.get(guess_of(job))
        if row is None and record is None:
            vanished += 1
            continue
        if row is not None and row["state"] == "dead":
            dead += 1
            if not row.get("error"):
                problems.append(f"{job} is dead without a reason")
            if record is not None:
                problems.append(f"{job} is dead but was scored")
            continue
        if (
            record is None
            and state.refunds.get(job) == "unpaid"
            and row is not None
            and row["state"] == "done"
        ):
            continue  # refunded, retried, and its wallet could not pay again: completed unscored
        if record is None:
            lost += 1
            problems.append(f"{job} was admitted but is not scored (row state {row and row['state']})")
            continue
        if state.scored_events[job] > 1:  # 0 is fine: the stream is capped, old events are trimmed
            double += 1
            problems.append(f"{job} has {state.scored_events[job]} scored events")
    for job, count in state.scored_events.items():
        if job not in admitted and job not in acknowledged:
            problems.append(f"{job} was scored ({count}x) but never admitted")
    if state.observed != len(state.records):  # score.lua observes the latency once per record it writes
        double += max(0, state.observed - len(state.records))
        problems.append(f"{state.observed} effects observed for {len(state.records)} GES records")
    counted: Counter[str] = Counter(r.player for r in state.records.values() if r.counted)
    for player, standing in state.standings.items():
        if standing.attempts != counted[player]:
            double += 1
            problems.append(
                f"{player} has {standing.attempts} attempts but {counted[player]} counted records"
            )
    return problems, {"lost": lost, "double": double, "dead": dead, "vanished": vanished}


def _wallet(client: Client, keys: GameKeys, player: str) -> Wallet:
    balances = {k.decode(): int(v) for k, v in client.hgetall(keys.wallet(player)).items()}
    entries = tuple(wallet.parse_entry(raw) for raw in client.lrange(keys.ledger(player), 0, -1))
    return Wallet(player, balances, entries)


def wallets(
    client: Client, keys: GameKeys, state: GameState, rows: dict[str, dict[str, str]] | None = None
) -> list[str]:
    problems = []
    for player, admitted in state.submitted.items():
        wallet = _wallet(client, keys, player)
        problems += [f"{player}: {problem}" for problem in reconcile(wallet)]
        charged = Counter(entry.job for entry in wallet.ledger if entry.reason == "guess")
        # A trimmed ledger (headed by a carry) holds a job's entries whole from its charge on (a refund,
        # a recharge come after it): a job with no charge kept is trimmed away, not missing.
        trimmed = any(entry.reason in ("carry", "carried") for entry in wallet.ledger)
        problems += [f"{job} was charged {n} times" for job, n in charged.items() if n != 1]
        if not trimmed:
            problems += [f"{job} was admitted but never charged" for job in admitted if job not in charged]
        problems += [f"{job} was charged but is not admitted" for job in charged if job not in admitted]
        problems += _refunds(wallet, state, rows, set(charged) if trimmed else None)
    return problems


def _refunds(
    wallet: Wallet,
    state: GameState,
    rows: dict[str, dict[str, str]] | None,
    kept: set[str] | None = None,
) -> list[str]:
    """Refunded at most once and only when dead; recharged at most once, only after a refund; a scored
    guess nets its price, a refunded unscored one nothing. ``kept``: of a trimmed ledger, the jobs whose
    charge it kept (the others' entries may be trimmed away)."""
    problems = []
    net: Counter[str] = Counter()
    refunded: Counter[str] = Counter()
    recharged: Counter[str] = Counter()
    for entry in wallet.ledger:
        if kept is not None and entry.job not in kept:
            continue
        if entry.reason in ("guess", "refund", "recharge"):
            net[entry.job] -= entry.delta
        if entry.reason == "refund":
            refunded[entry.job] += 1
        if entry.reason == "recharge":
            recharged[entry.job] += 1
    for job in sorted(set(refunded) | set(recharged)):
        mark, scored = state.refunds.get(job), guess_of(job) in state.records
        if refunded[job] > 1 or recharged[job] > 1:
            problems.append(f"{job} was refunded {refunded[job]} and recharged {recharged[job]} times")
        if refunded[job] and mark is None:
            problems.append(f"{job} was refunded without its marker")
        if recharged[job] and not refunded[job]:
            problems.append(f"{job} was recharged but never refunded")
        row = (rows or {}).get(job)
        if refunded[job] and row is not None and row["state"] != ("dead" if mark == "refunded" else "done"):
            problems.append(f"{job} is refunded ({mark}) but its row is {row['state']}")
        if refunded[job] and scored != (mark == "recharged"):
            problems.append(f"{job} is refunded ({mark}) and {'scored' if scored else 'not scored'}")
    problems += [
        f"{record.job} was scored for a net charge of {net[record.job]}"
        for record in state.records.values()
        if record.player == wallet.player and net[record.job] <= 0 and (kept is None or record.job in kept)
    ]
    return problems


def leaderboard(state: GameState) -> list[str]:
    folded = fold_records(state.records.values())
    problems = []
    expected = [ranking.board_member(standing) for standing in ranking.rank(folded.standings.values())]
    if expected != state.board:
        problems.append(
            f"the board ({len(state.board)} players) is not the ranking recomputed from the GES records"
            " in admission order"
        )
    problems += [
        f"{player}'s standing is not the fold of their records in admission order"
        for player in sorted(set(folded.standings) | set(state.standings))
        if folded.standings.get(player) != state.standings.get(player)
    ]
    problems += [
        f"{guess_id} records (counted, attempt) {(record.counted, record.attempt)},"
        f" admission order gives {folded.attempts[guess_id]}"
        for guess_id, record in sorted(state.records.items())
        if (record.counted, record.attempt) != folded.attempts[guess_id]
    ]
    for player in sorted(set(folded.standings) | set(state.results)):
        standing = folded.standings.get(player)
        want = None if standing is None else standing.attempts if standing.solved else 0
        if state.results.get(player) != want:
            problems.append(f"{player}'s stats result is {state.results.get(player)}, the fold gives {want}")
    return problems


UNHANDLED_SHOWN = 10  # dead jobs no handler ran, listed one by one (then counted)


def dead_unhandled(rows: dict[str, dict[str, str]], starts: Starts, lost_holders: set[int]) -> list[str]:
    """Dead jobs that no handler ever ran, whose last holder (the row's ``owner``, ``host:pid``) was
    neither killed nor stopped: a try was spent on a claim whose worker never received the job."""
    problems = []
    for job, row in sorted(rows.items()):
        if row.get("state") != "dead" or starts.ran(job):
            continue
        owner = row.get("owner", "")
        pid = owner.rsplit(":", 1)[-1]
        if pid.isdigit() and int(pid) in lost_holders:
            continue
        problems.append(
            f"{job} was dead-lettered ({row.get('error', '')!r}) but no handler ever ran it "
            f"(last claimed by {owner or 'no one'}, alive): a claim's lost reply spent its last try"
        )
    if len(problems) > UNHANDLED_SHOWN:
        more = len(problems) - UNHANDLED_SHOWN
        problems = [*problems[:UNHANDLED_SHOWN], f"... and {more} more dead jobs no handler ran"]
    return problems
