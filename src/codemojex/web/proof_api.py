"""The proof page's API: the seed's interactive, run against the real queue and the real worker process.

* ``POST /api/proof/jobs`` submits a guess job (a random guess on the current round, charged as any
  guess). With ``crash``, the job is first marked (:func:`codemojex.faults.request_crash`) so that the
  score worker, which ``codemojex serve`` starts with ``score.after_effect.requested`` armed, writes
  the effect and then dies by SIGKILL before acknowledging. The job stays in ``active`` until its lease
  deadline, the sweep returns it to its lane, the restarted worker re-claims it under the next attempts
  token and runs it as a no-op: the scored count stays 1.
* ``POST /api/proof/jobs/{job}/resubmit`` submits the same job id again: a duplicate, nothing charged.
* ``POST /api/proof/jobs/{job}/stale`` races a finisher holding an old attempts token (the crashed
  worker's, after a crash): the fenced finish refuses it.

All of it answers 403 unless the host runs with the proof on. A proof player who cannot pay for a guess
is credited the price first (reason ``proof_grant``, in the ledger like any credit).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from codemojex import faults, guesses, rounds, wallet
from codemojex.game import translate_errors
from codemojex.keys import JOB
from codemojex.payload import decode_payload
from codemojex.web import views
from codemojex.web.auth import PlayerId, bearer, is_operator
from codemojex.web.host import WorkerStatus, host_of
from codemojex.web.player_api import inspect_job
from codemojex.web.problems import REFUSAL_STATUS, Problem
from echomq import Claim, ids

router = APIRouter(prefix="/api/proof", tags=["proof"])


class NewProofJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    crash: bool = False


def _require_proof(request: Request) -> None:
    if not host_of(request).config.proof:
        raise Problem(403, "forbidden", "the proof is off on this host (codemojex serve --proof turns it on)")


# The key of the worker's opaque instance tag: random per host process, so the tag tells nothing of the pid.
_INSTANCE_KEY = secrets.token_bytes(16)


def instance_of(worker: WorkerStatus) -> str:
    """An opaque tag of the worker process (its pid and restart count, keyed): it changes on a restart."""
    seen = f"{worker.pid}:{worker.restarts}".encode()
    return hmac.new(_INSTANCE_KEY, seen, hashlib.sha256).hexdigest()[:12]


@router.get("")
async def status(request: Request) -> dict[str, Any]:
    """The proof switch and the score worker: ``alive`` and an opaque ``instance`` tag that changes when
    the worker is restarted; its ``pid`` and ``restarts`` only for the operator token."""
    config = host_of(request).config
    worker = config.worker_status() if config.worker_status else None
    shown: dict[str, Any] | None = None
    if worker is not None:
        shown = {"instance": instance_of(worker), "alive": worker.alive}
        if is_operator(request, bearer(request)):
            shown |= {"pid": worker.pid, "restarts": worker.restarts}
    return {"enabled": config.proof, "tag": config.tag, "worker": shown}


def _answer(submission: guesses.Submission) -> dict[str, Any]:
    if submission.refusal is not None:
        raise Problem(REFUSAL_STATUS[submission.refusal], submission.refusal.value, submission.detail)
    return views.submission_view(submission)


@router.post("/jobs", status_code=202)
async def new_job(request: Request, spec: NewProofJob, player_id: PlayerId) -> dict[str, Any]:
    _require_proof(request)
    game = host_of(request).game
    the_round = await rounds.current_round(game)
    if the_round is None:
        raise Problem(404, "no_open_round", "no round is open right now")
    held = await wallet.read_wallet(game, player_id, ledger_limit=1)
    if wallet.choose_price(the_round.prices, held.balances) is None:
        currency, amount = the_round.prices[0]
        await wallet.credit(game, player_id, currency, amount, reason="proof_grant")
    keys = the_round.keyboard.keys
    guess = [secrets.choice(keys) for _ in range(the_round.length)]
    job = ids.mint(JOB)
    if spec.crash:
        await faults.request_crash(game, job)
    return _answer(await guesses.submit(game, the_round.id, player_id, guess, job_id=job))


@router.post("/jobs/{job_id}/resubmit", status_code=202)
async def resubmit(request: Request, job_id: str, player_id: PlayerId) -> dict[str, Any]:
    _require_proof(request)
    info = await inspect_job(request, job_id, player_id)
    if info.payload is None:
        raise Problem(409, "trimmed", f"job {job_id} is past its retention: only a tombstone is left")
    request_ = decode_payload(info.payload)
    game = host_of(request).game
    return _answer(await guesses.submit(game, request_.round, player_id, list(request_.guess), job_id=job_id))


@router.post("/jobs/{job_id}/stale")
async def stale(request: Request, job_id: str, player_id: PlayerId) -> dict[str, Any]:
    _require_proof(request)
    info = await inspect_job(request, job_id, player_id)
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
    game = host_of(request).game
    with translate_errors():
        finish = await game.bus.complete(Claim(job_id, info.lane, token), b"stale finisher")
        after = await game.bus.inspect(job_id)
    return {
        "job_id": job_id,
        "token_used": token,
        "token_current": after.attempts,
        "outcome": finish.value,
        "state": after.state.value,
    }
