"""The report of a conformance run, as text for people and JSON for machines (and the README).

Timings are figures, never verdicts (a loaded machine is slow, not wrong): a punctuality figure that
looks like a lapse (a due job later than half the quiet workers' sweep period) is a *warning* line.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


def _pct(values: list[int], p: int) -> int | None:
    if not values:
        return None
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def summary(values: list[int]) -> dict[str, int | None]:
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "p50": _pct(ordered, 50),
        "p99": _pct(ordered, 99),
        "max": ordered[-1] if ordered else None,
    }


def _line(name: str, values: list[int]) -> str:
    s = summary(values)
    return f"p50 {s['p50']} / p99 {s['p99']} / max {s['max']} ms over {s['count']} {name}"


def _mib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**20:.1f} MiB"


# Half the quiet workers' sweep period (QUIET_SWEEP_S, 1 s): a due job later than this waited for a sweep.
LATE_WARNING_MS = 500


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
    memory: dict[str, int | None] = field(default_factory=dict)  # see codemojex.conformance.memory.figures
    punctuality: dict[str, Any] = field(default_factory=dict)  # lists of ms and counts (see .observers)
    retried: int = 0  # failed tries sent back with a backoff (the 'retried' counter)
    flow: dict[str, Any] = field(default_factory=dict)  # a --flow run's gates and named tasks (.flow)

    @property
    def warnings(self) -> list[str]:
        p = self.punctuality
        late = [*p.get("quiet_delayed_late_ms", []), *p.get("quiet_retry_late_ms", [])]
        if late and max(late) > LATE_WARNING_MS:
            return [
                (
                    f"an idle worker ran a due job {max(late)} ms late (more than half its sweep period): "
                    "did it forget a due time it knew of?"
                )
            ]
        return []

    @property
    def ok(self) -> bool:
        return not self.violations and self.lost == 0 and self.double == 0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["recovery_ms"] = summary(self.recovery_ms)
        data["punctuality"] = {
            name: summary(value) if name.endswith("_ms") else value
            for name, value in self.punctuality.items()
        }
        data["warnings"] = self.warnings
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
            *self._memory_lines(),
            *self._punctuality_lines(),
        ]
        if self.warnings:
            lines += [f"  warning: {w}" for w in self.warnings]
        if self.violations:
            lines.append(f"  violations ({len(self.violations)}):")
            lines += [f"    {v}" for v in self.violations[:50]]
        return "\n".join(lines)

    def _memory_lines(self) -> list[str]:
        m = self.memory
        if not m:
            return []
        ttl = self.config.get("result_ttl_ms")
        return [
            (
                f"  redis used_memory      {_mib(m.get('used_memory_start'))} at the start, "
                f"{_mib(m.get('used_memory_end'))} at the end, peak {_mib(m.get('used_memory_peak'))}"
            ),
            (
                f"  done rows past TTL     at most {m.get('past_ttl_max')} "
                f"(result_ttl_ms {ttl or 'default'}); "
                f"done set at most {m.get('done_max')} ids; {m.get('samples')} samples"
            ),
        ]

    def _punctuality_lines(self) -> list[str]:
        p = self.punctuality
        if not p:
            return []
        spread = p.get("spread") or []
        mean = f"{sum(spread) / len(spread):.1f}" if spread else "?"
        lines = [
            f"  handler starts         {p.get('handler_starts')}; retries with backoff {self.retried}",
            f"  retry past due         {_line('retries', p.get('retry_late_ms', []))}",
            (
                f"  killed worker's jobs   run again {_line('jobs', p.get('rerun_ms', []))}; "
                f"by {mean} workers per death on average"
            ),
        ]
        if p.get("quiet_held") or p.get("quiet_delayed_late_ms"):
            lines += [
                "  quiet phase (idle workers):",
                f"    delayed past due     {_line('delayed jobs', p.get('quiet_delayed_late_ms', []))}",
                f"    retry past due       {_line('retries', p.get('quiet_retry_late_ms', []))}",
                (
                    f"    a dead worker's {p.get('quiet_held')} jobs ran again on {p.get('quiet_runners')} "
                    f"of {p.get('quiet_idle')} idle workers, {_line('jobs', p.get('quiet_rerun_ms', []))}"
                ),
            ]
        return lines
