"""The guess job's payload: the only thing the host and the score worker share.

The canonical JSON of ``{"v": 1, "round": RND, "player": PLR, "guess": [six keys]}``: sorted keys, no
spaces, UTF-8. Canonical, so a retried submit of the same guess is byte-identical and the bus's
admission deduplicates it (the same job id with another payload is a conflict, never a second job).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from codemojex.errors import InvalidPayload
from codemojex.keys import PLAYER, ROUND, check_id

PAYLOAD_VERSION = 1


def encode_payload(round_id: str, player_id: str, guess: Sequence[str]) -> bytes:
    """The job payload: canonical (sorted keys, no spaces, UTF-8), so a retry is byte-identical."""
    body = {"v": PAYLOAD_VERSION, "round": round_id, "player": player_id, "guess": list(guess)}
    return json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class GuessJob:
    """A decoded job payload."""

    round: str
    player: str
    guess: tuple[str, ...]


def decode_payload(payload: bytes) -> GuessJob:
    """Read a guess job's payload; :class:`InvalidPayload` for anything :func:`encode_payload` would not
    write (the score worker dead-letters such a job)."""
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidPayload(f"a guess payload is JSON: {exc}") from None
    if not isinstance(data, dict) or set(data) != {"v", "round", "player", "guess"}:
        raise InvalidPayload("a guess payload has exactly v, round, player and guess")
    if data["v"] != PAYLOAD_VERSION:
        raise InvalidPayload(f"a guess payload of version {data['v']!r} (this worker reads 1)")
    guess = data["guess"]
    if not isinstance(guess, list) or not all(isinstance(key, str) and key for key in guess):
        raise InvalidPayload("a guess payload's guess is a list of keys")
    try:
        return GuessJob(check_id(data["round"], ROUND), check_id(data["player"], PLAYER), tuple(guess))
    except ValueError as exc:
        raise InvalidPayload(f"a guess payload names ill-formed ids: {exc}") from None
