"""The typed bodies of the API's 2xx answers, as the OpenAPI schema publishes them.

Each route declares one of these as its ``response_model``; FastAPI checks every answer against it. They
forbid extra fields, so an answer that drifts from its published shape (a field added to a view and not
here) fails the suite instead of reaching a client unannounced. The operator's and the proof's shapes
are :mod:`codemojex.web.operator_schemas`. The error shape is
:class:`codemojex.web.problems.ErrorBody`. The field meanings are those of :mod:`codemojex.web.views`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PriceOut(Shape):
    currency: str
    amount: int


class RoundOut(Shape):
    round_id: str
    keyboard: list[str]
    length: int
    prices: list[PriceOut] = Field(description="in order of preference: the first the wallet can pay")
    status: str = Field(description="scheduled, open or closed")
    opens_ms: int
    closes_ms: int | None
    closed_ms: int | None
    max_guesses: int | None
    server_ms: int = Field(description="the Redis server's clock when this was read")
    secret: list[str] | None = Field(description="the code, once the round is closed; else null")


class RoundsOut(Shape):
    rounds: list[RoundOut]


class NewPlayerOut(Shape):
    player_id: str
    name: str
    token: str = Field(description="the player's bearer token: shown once, keep it")
    created_ms: int
    token_expires_ms: int = Field(description="when the token ends (rotate it before: POST /api/me/token)")
    expires_unless_played_ms: int = Field(description="a player with no admitted guess by then is deleted")
    recovery_code: str | None = Field(
        default=None,
        description="signs the player in on another device (POST /api/recover): shown once, keep it; null "
        "if it could not be made now (ask for one: POST /api/me/recovery)",
    )


class PlayerOut(Shape):
    player_id: str
    name: str
    created_ms: int
    expires_unless_played_ms: int | None = Field(description="null once an admitted guess keeps the player")
    has_recovery_code: bool = Field(default=False, description="whether a recovery code works for the player")


class RecoveryOut(Shape):
    player_id: str
    recovery_code: str = Field(description="shown once; the player's previous code no longer works")


class RecoveredOut(Shape):
    player_id: str
    name: str
    token: str = Field(description="a new bearer token for this device; shown once")
    token_expires_ms: int


class TokenOut(Shape):
    player_id: str
    token: str = Field(description="the new bearer token; the one presented is revoked")
    token_expires_ms: int


class RevokedOut(Shape):
    player_id: str
    revoked: bool


class LedgerEntryOut(Shape):
    at_ms: int
    currency: str
    delta: int
    balance: int
    reason: str
    job_id: str | None


class EconomyOut(Shape):
    allowance: list[PriceOut] = Field(
        description="each balance is topped up to this level at your first admitted guess of a round"
    )
    solve_reward: list[PriceOut] = Field(description="credited once a round, when you solve it")


class NextRoundOut(Shape):
    top_up: list[PriceOut] = Field(
        description="what your first guess of the next round would add, at today's balances"
    )
    opens_ms: int | None = Field(description="when the next round opens, if one is scheduled; else null")


class OfferOut(Shape):
    round_id: str
    round_status: str = Field(description="scheduled, open or closed")
    allowance_taken: bool = Field(description="your first admitted guess of this round took its allowance")
    top_up: list[PriceOut] = Field(description="what your first guess here adds first ([] once taken)")
    next_price: PriceOut | None = Field(
        description="what your next guess of this round costs, the top-up included; null: you cannot pay"
        " (a guess would be refused 402 insufficient_funds)"
    )
    rewarded: bool = Field(description="this round's solve reward was paid to you")
    next_round: NextRoundOut


class WalletOut(Shape):
    player_id: str
    balances: dict[str, int]
    ledger: list[LedgerEntryOut] = Field(description="the newest entries, oldest first")
    ledger_total: int
    economy: EconomyOut = Field(description="the rule by which players get more to play with")
    offer: OfferOut | None = Field(
        description="your wallet in the round asked for (round_id), else the open round; null if none"
    )


class SubmissionOut(Shape):
    job_id: str | None
    status: str = Field(description="admitted, or duplicate for a job id already admitted")
    charged: PriceOut | None
    guess: list[str]


class FeedbackOut(Shape):
    code: str = Field(description="one mark a position: hit, near or miss as 🟩🟨⬜")
    marks: list[str]
    hits: int
    nears: int
    solved: bool


class GuessOut(Shape):
    job_id: str
    guess: list[str]
    state: str
    submitted_ms: int
    feedback: FeedbackOut | None
    scored_ms: int | None
    attempt: int | None
    counted: bool | None


class MyGuessesOut(Shape):
    round_id: str
    guesses: list[GuessOut]
    locks: dict[str, str] = Field(description="position (0-based, as text) -> the locked key")
    proven: dict[str, str] = Field(description="position -> the key a scored guess proved a hit there")
    keys: dict[str, str] = Field(
        description="key -> 'in' or 'out': what the caller's scored guesses prove (codemojex.hints)"
    )
    share: str | None = Field(
        description="the shareable result: round, attempts, a row of 🟩🟨⬜ per attempt; null before a score"
    )


class PlayerStatsOut(Shape):
    player_id: str
    played: int = Field(description="rounds in which the player had a guess scored")
    solved: int
    best_attempts: int | None = Field(description="fewest attempts of a solved round; null before a solve")
    current_streak: int = Field(description="solved rounds in a row, in round order (see codemojex.streaks)")
    best_streak: int


class LockOut(Shape):
    position: int
    key: str


class UnlockOut(Shape):
    position: int
    removed: bool


class EntryOut(Shape):
    rank: int
    player_id: str
    name: str
    solved: bool
    hits: int
    nears: int
    attempts: int
    best_at_ms: int = Field(
        description="when the best feedback was first reached (for a solved player: the solve), ranked"
        " before attempts (README, Ranking)"
    )


class BoardOut(Shape):
    round_id: str
    entries: list[EntryOut]


class JobOut(Shape):
    job_id: str
    state: str
    lane: str
    location: str | None = Field(description="the key holding the id; null for a trimmed tombstone")
    attempts: int = Field(description="the attempts token: the fence a finisher must hold")
    tries: int
    max_attempts: int
    deadline_ms: int | None
    finished_ms: int | None
    owner: str | None = Field(description="the claiming worker: shown to the operator only")
    error: str | None
    trimmed: bool
    guess_id: str
    scored_count: int
    server_ms: int


class HealthOut(Shape):
    ok: bool


class TicketOut(Shape):
    ticket: str = Field(description="give it to GET /api/events?ticket=...: used once")
    round_id: str
    expires_in_s: int


class LobbyOut(Shape):
    server_ms: int = Field(description="the Redis server's clock when this was read")
    rounds: list[RoundOut] = Field(description="every open round, newest first, with its close time")
    upcoming: list[RoundOut] = Field(description="rounds that open later (the schedule's next one)")


class SummaryOut(Shape):
    round_id: str
    keyboard: list[str]
    secret: list[str] | None
    opens_ms: int
    closes_ms: int | None
    closed_ms: int
    players: int = Field(description="players with an admitted guess in the round")
    guesses: int = Field(description="scored guesses in the round")
    winners: list[EntryOut] = Field(description="the top of the final board (at most 10)")


class HistoryOut(Shape):
    rounds: list[SummaryOut] = Field(description="closed rounds, newest close first")


class RoundHistoryOut(Shape):
    summary: SummaryOut
    guesses_kept: bool = Field(
        description="false once the round's per-guess data is past its retention (then guesses is [])"
    )
    kept_until_ms: int | None = Field(description="when the per-guess data goes (null: gone already)")
    guesses: list[GuessOut] | None = Field(
        description="the caller's own guesses in the round, oldest first; null without a token"
    )
