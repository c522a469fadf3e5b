"""The proof page's API: the seed's interactive, on the demonstration game of :mod:`codemojex.proof`.

Every call but ``GET /api/proof`` takes a registered player's token (``Authorization: Bearer``): the
caller plays as their demo player (the same ``PLR`` id in the demo game, holding only the worthless demo
currency), on the demo bus (tag ``<tag>.proof``), on the demo round (its own secret), scored by the demo
worker. Nothing here reads or writes the real game's keys but the token lookup: no real wallet is
debited or credited, and no proof job appears in the real round, board, ledger, events or latency.

* ``GET /api/proof``: the switches (``enabled``, ``crash``), the demo ``tag`` and ``round_id``, the caps,
  and the demo worker: ``alive`` and an opaque ``instance`` tag that changes when it restarts; its
  ``pid`` and ``restarts`` only for the operator token.
* ``POST /api/proof/jobs`` submits a demo guess job (a random guess on the demo round). With ``crash``
  (403 ``proof_crash_off`` unless the host runs with ``--proof-crash``), the job is first marked
  (:func:`codemojex.faults.request_crash`, in the demo keyspace) so that the demo worker writes the
  effect and then dies by SIGKILL before acknowledging; the sweep returns the job after its lease and
  the restarted demo worker runs it as a no-op: the scored count stays 1. Caps: 429 ``proof_cap``.
* ``GET /api/proof/jobs``: the caller's demo jobs in the demo round, and their demo balances.
* ``GET /api/proof/jobs/{job}``: where one of the caller's demo jobs is (as ``GET /api/jobs/{job}``).
* ``POST /api/proof/jobs/{job}/resubmit`` submits the same demo job id again: a duplicate, nothing charged.
* ``POST /api/proof/jobs/{job}/stale`` races a finisher holding an older attempts token against one of
  the caller's demo jobs (the crashed demo worker's, after a crash): the fenced finish refuses it. It
  reaches demo jobs only: a real guess is not on the demo bus.

All of it answers 403 ``forbidden`` unless the host runs with the proof on.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from codemojex import faults, guesses, proof, wallet
from codemojex.errors import UnknownJob, UnknownPlayer
from codemojex.game import Game, translate_errors
from codemojex.keys import JOB, check_id
from codemojex.payload import decode_payload
from codemojex.supervisor import WorkerStatus
from codemojex.web import operator_schemas, schemas, views
from codemojex.web.auth import PlayerId, bearer, is_operator
from codemojex.web.host import host_of
from codemojex.web.player_api import job_row
from codemojex.web.problems import REFUSAL_STATUS, Problem, answers
from echomq import Claim, JobInfo, ids

router = APIRouter(prefix="/api/proof", tags=["proof"])


class NewProofJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    crash: bool = False


def _demo(request: Request) -> Game:
    demo = host_of(request).demo
    if not host_of(request).config.proof or demo is None:
        raise Problem(403, "forbidden", "the proof is off on this host (codemojex serve turns it on)")
    return demo


# The key of the worker's opaque instance tag: random per host process, so the tag tells nothing of the pid.
_INSTANCE_KEY = secrets.token_bytes(16)


def instance_of(worker: WorkerStatus) -> str:
    """An opaque tag of the worker process (its pid and restart count, keyed): it changes on a restart."""
    seen = f"{worker.pid}:{worker.restarts}".encode()
    return hmac.new(_INSTANCE_KEY, seen, hashlib.sha256).hexdigest()[:12]


@router.get("", response_model=operator_schemas.ProofStatusOut, responses=answers())
async def status(request: Request) -> dict[str, Any]:
    """The proof's switches, its demo tag and round, its caps and the demo worker (see the module doc)."""
    host = host_of(request)
    config = host.config
    worker = config.worker_status() if config.proof and config.worker_status else None
    shown: dict[str, Any] | None = None
    if worker is not None:
        shown = {"instance": instance_of(worker), "alive": worker.alive}
        if is_operator(request, bearer(request)):
            shown |= {"pid": worker.pid, "restarts": worker.restarts}
    the_round = await proof.current_round(host.demo) if config.proof and host.demo is not None else None
    return {
        "enabled": config.proof,
        "crash": config.proof and config.proof_crash,
        "tag": host.demo.bus.tag if config.proof and host.demo is not None else None,
        "round_id": the_round.id if the_round is not None else None,
        "caps": {"per_caller": config.proof_caller_cap, "total": config.proof_total_cap},
        "worker": shown,
    }


def _answer(submission: guesses.Submission) -> dict[str, Any]:
    if submission.refusal is guesses.Refusal.TOO_MANY_QUEUED:
        raise Problem(429, "proof_cap", "you have the most proof jobs waiting: wait for them to be scored")
    if submission.refusal is not None:
        raise Problem(REFUSAL_STATUS[submission.refusal], submission.refusal.value, submission.detail)
    return views.submission_view(submission)


@router.post(
    "/jobs",
    status_code=202,
    response_model=schemas.SubmissionOut,
    responses=answers(401, 403, 404, 409, 413, 422, 429),
)
async def new_job(request: Request, spec: NewProofJob, player_id: PlayerId) -> dict[str, Any]:
    """A demo guess job of the caller's demo player on the demo round (crash: see the module doc)."""
    demo = _demo(request)
    config = host_of(request).config
    if spec.crash and not config.proof_crash:
        raise Problem(
            403, "proof_crash_off", "the crash button is off on this host (codemojex serve --proof-crash)"
        )
    the_round = await proof.current_round(demo)
    if the_round is None:
        raise Problem(404, "no_open_round", "no demo round is open (codemojex serve opens one)")
    if await proof.pending_total(demo) >= config.proof_total_cap:
        raise Problem(429, "proof_cap", "the proof has the most jobs waiting it takes: try again shortly")
    guess = [secrets.choice(the_round.keyboard.keys) for _ in range(the_round.length)]
    job = ids.mint(JOB)
    if spec.crash:
        await faults.request_crash(demo, job)
    return _answer(await proof.submit(demo, the_round.id, player_id, guess, job))


@router.get("/jobs", response_model=operator_schemas.ProofJobsOut, responses=answers(401, 403))
async def my_jobs(request: Request, player_id: PlayerId) -> dict[str, Any]:
    """The caller's demo jobs in the demo round (oldest first) and their demo balances."""
    demo = _demo(request)
    the_round = await proof.current_round(demo)
    mine = await guesses.player_guesses(demo, the_round.id, player_id) if the_round is not None else []
    try:
        balances = (await wallet.read_wallet(demo, player_id, ledger_limit=1)).balances
    except UnknownPlayer:  # no proof job yet: the demo player is registered by the first one
        balances = {}
    return {
        "round_id": the_round.id if the_round is not None else None,
        "guesses": [views.guess_view(guess) for guess in mine],
        "balances": balances,
    }


async def _inspect(demo: Game, job_id: str, owner: str) -> JobInfo:
    """The caller's demo job; 404 ``unknown_job`` if it is not on the demo bus or not on their lane."""
    check_id(job_id, JOB)
    try:
        with translate_errors():
            info = await demo.bus.inspect(job_id)
    except UnknownJob:
        raise UnknownJob(f"no proof job {job_id} of yours") from None
    if info.lane != owner:
        raise UnknownJob(f"no proof job {job_id} of yours")
    return info


@router.get("/jobs/{job_id}", response_model=schemas.JobOut, responses=answers(400, 401, 403, 404))
async def job(request: Request, job_id: str, player_id: PlayerId) -> dict[str, Any]:
    """Where the caller's demo job is, its attempts token and its scored count."""
    demo = _demo(request)
    return await job_row(demo, await _inspect(demo, job_id, player_id), operator=False)


@router.post(
    "/jobs/{job_id}/resubmit",
    status_code=202,
    response_model=schemas.SubmissionOut,
    responses=answers(400, 401, 403, 404, 409, 429),
)
async def resubmit(request: Request, job_id: str, player_id: PlayerId) -> dict[str, Any]:
    demo = _demo(request)
    info = await _inspect(demo, job_id, player_id)
    if info.payload is None:
        raise Problem(409, "trimmed", f"job {job_id} is past its retention: only a tombstone is left")
    request_ = decode_payload(info.payload)
    return _answer(await guesses.submit(demo, request_.round, player_id, list(request_.guess), job_id=job_id))


@router.post(
    "/jobs/{job_id}/stale",
    response_model=operator_schemas.StaleOut,
    responses=answers(400, 401, 403, 404, 409),
)
async def stale(request: Request, job_id: str, player_id: PlayerId) -> dict[str, Any]:
    demo = _demo(request)
    info = await _inspect(demo, job_id, player_id)
    # A token older than the current one. A job delivered once has none: its one token is the claim that
    # holds or finished it, and a finish under it is that claim's own (a retry after a lost reply is
    # answered `done`, truthfully), not a stale one. Crashing a worker first makes an older token.
    if info.attempts < 2:
        raise Problem(
            409,
            "no_stale_token",
            "this job was delivered once, so no older token exists: crash a worker mid-score first",
        )
    token = info.attempts - 1
    with translate_errors():
        finish = await demo.bus.complete(Claim(job_id, info.lane, token), b"stale finisher")
        after = await demo.bus.inspect(job_id)
    return {
        "job_id": job_id,
        "token_used": token,
        "token_current": after.attempts,
        "outcome": finish.value,
        "state": after.state.value,
    }
