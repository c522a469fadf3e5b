"""What the run did, as the harness saw it: every submit call and its answer, and every fault it caused.

The checks compare this history with what Redis holds at the end: a guess whose submit was answered
``admitted`` or ``duplicate`` is *acknowledged*, and an acknowledged guess must be scored exactly once
(or, past its max attempts, dead with a reason). A submit that got no answer (Redis unreachable) is
retried with the same JOB id until it gets one, which is what an idempotent client does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class History:
    calls: Counter[str] = field(default_factory=Counter)  # submit answers: admitted, duplicate, error, ...
    acknowledged: set[str] = field(default_factory=set)  # JOB ids answered admitted or duplicate
    first_answer: dict[str, str] = field(default_factory=dict)  # JOB -> its first answer
    faults: Counter[str] = field(default_factory=Counter)  # injected, by kind
    worker_exits: Counter[str] = field(default_factory=Counter)  # how worker processes ended
    # A worker's death: (server ms, the jobs it held with their attempts token then).
    kills: list[tuple[int, list[tuple[str, int]]]] = field(default_factory=list)
    over_http: int = 0  # guesses answered over HTTP (the others through codemojex.guesses.submit)
    http_retried: int = 0  # HTTP guesses whose first request failed and a retry with the same key landed
    problems: list[str] = field(default_factory=list)  # what the players saw that breaks a promise
    # Workers killed or stopped by a fault (pids): a try they held may expire with no handler run.
    lost_holders: set[int] = field(default_factory=set)

    def answered(self, job: str, answer: str) -> None:
        self.calls[answer] += 1
        self.first_answer.setdefault(job, answer)
        if answer in ("admitted", "duplicate"):
            self.acknowledged.add(job)

    @property
    def retried_after_error(self) -> int:
        """JOB ids whose first call failed and that were answered later (idempotent retries)."""
        return sum(
            1 for job, first in self.first_answer.items() if first == "error" and job in self.acknowledged
        )
