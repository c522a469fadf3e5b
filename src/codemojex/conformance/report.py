"""The report of a conformance run, as text for people and JSON for machines (and the README)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


def _pct(values: list[int], p: int) -> int | None:
    if not values:
        return None
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


@dataclass(frozen=True, slots=True)
class Report:
    config: dict[str, Any]
    seconds: float
    submit_calls: dict[str, int]  # answers to every submit call
    acknowledged: int  # guesses answered admitted (or duplicate) at least once
    duplicates_absorbed: int
    over_http: int  # guesses admitted through the web host (POST with an Idempotency-Key)
    idempotent_retries: int  # guesses whose first call failed and a retry with the same id landed
    faults: dict[str, int]
    worker_exits: dict[str, int]
    worker_restarts: int
    redeliveries: int  # jobs delivered more than once
    reclaimed: int  # expired leases the sweep returned
    stale_refused: int  # finishes refused for a stale token
    leases_revoked: int
    recovery_ms: list[int]  # kill of a worker -> finish of a job it held, server clock
    scored: int
    lost: int
    double: int
    dead: int
    vanished: int  # acknowledged, then gone with a Redis crash (only possible with everysec)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations and self.lost == 0 and self.double == 0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["recovery_ms"] = {
            "count": len(self.recovery_ms),
            "p50": _pct(self.recovery_ms, 50),
            "p99": _pct(self.recovery_ms, 99),
            "max": self.recovery_ms[-1] if self.recovery_ms else None,
        }
        return data

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, sort_keys=True)

    def to_text(self) -> str:
        c = self.config
        faults = ", ".join(f"{kind} {n}" for kind, n in sorted(self.faults.items())) or "none"
        exits = ", ".join(f"{how}: {n}" for how, n in sorted(self.worker_exits.items())) or "none"
        recovery = self.as_dict()["recovery_ms"]
        verdict = "PASS" if self.ok else "FAIL"
        setup = (
            f"seed {c['seed']}, appendfsync {c['appendfsync']}, {c['workers']} workers x {c['concurrency']}"
        )
        lines = [
            f"conformance run: {verdict} in {self.seconds:.0f} s ({setup})",
            f"  guesses acknowledged   {self.acknowledged} of {c['guesses']} planned; scored {self.scored}",
            f"  duplicates absorbed    {self.duplicates_absorbed}",
            f"  admitted over HTTP     {self.over_http} (Idempotency-Key; the rest through guesses.submit)",
            f"  idempotent retries     {self.idempotent_retries} (a first call failed; the same id landed)",
            f"  faults injected        {faults}",
            f"  worker exits           {exits}; restarts {self.worker_restarts}",
            f"  redeliveries           {self.redeliveries} jobs (reclaimed {self.reclaimed} leases)",
            f"  stale finishes refused {self.stale_refused}; leases revoked {self.leases_revoked}",
            (
                f"  recovery of a killed worker's job: p50 {recovery['p50']} ms, p99 {recovery['p99']} ms, "
                f"max {recovery['max']} ms over {recovery['count']} jobs"
            ),
            f"  lost {self.lost}   double {self.double}   dead {self.dead}   vanished {self.vanished}",
        ]
        if self.violations:
            lines.append(f"  violations ({len(self.violations)}):")
            lines += [f"    {v}" for v in self.violations[:50]]
        return "\n".join(lines)
