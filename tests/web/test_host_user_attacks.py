"""A compromised web host (issue 12, adversary): a Redis connection as the host's ACL user, trying the
game's own cached scripts, and the integrity of the data its user may write.

The host may run (``EVALSHA``) every script the worker loaded, the ones that read or write secrets
included (open_round, close_round, ...). Redis checks each key a script touches against the caller's
rights, so whatever ``KEYS`` and ``ARGV`` the host crafts, no script answers or copies a secret.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import redis

from codemojex import access
from codemojex.game import LIBRARY
from codemojex.keys import GameKeys
from echomq.scripts import ECHOMQ
from tests.support.acl import admin_round
from tests.support.web import FRUIT


def test_no_cached_game_script_run_by_the_host_reveals_or_copies_a_secret(acl):
    round_id, secret = admin_round(acl, FRUIT)
    keys = GameKeys(acl.tag)
    admin, host = acl.client(access.ADMIN), acl.client(access.HOST)
    said = json.dumps(secret, ensure_ascii=False)
    try:
        before = set(admin.scan_iter(match=f"{keys.prefix}*"))
        ran = 0
        for library in (LIBRARY, ECHOMQ):
            for name, count in library.counts.items():
                sha = hashlib.sha1(library.source(name).encode()).hexdigest()
                assert host.script_exists(sha) == [True]
                # every key slot the secret, or the secret and the host's own keys mixed
                secret_key = keys.secret(round_id)
                for slots in ([secret_key] * count, [secret_key, *before][:count]):
                    if not slots:
                        continue
                    args = [round_id, "1", "0", "", round_id, "close", "open", "[]"]  # the host knows no code
                    try:
                        answer = repr(host.evalsha(sha, count, *slots, *args))
                    except redis.ResponseError as refusal:
                        answer = str(refusal)
                    assert said not in answer, name
                    assert secret[0] not in answer, name
                    ran += 1
        assert ran > 10  # the test ran the scripts (it can fail)
        # nothing the host may read holds the secret, and the round is still open and unrevealed
        for key in admin.scan_iter(match=f"{keys.prefix}*"):
            if admin.type(key) == b"string":
                assert said not in (admin.get(key) or b"").decode(errors="replace"), key
        assert admin.get(keys.revealed(round_id)) is None
        assert json.loads(admin.get(keys.secret(round_id))) == secret
    finally:
        host.close()
        admin.close()


@pytest.mark.xfail(
    strict=True,
    reason="design: the host's user writes the wallets (submit.lua debits them as the host), so a "
    "compromised host can credit any wallet and play without limit; SECURITY.md says so",
)
def test_the_hosts_user_cannot_credit_a_wallet(acl):
    keys = GameKeys(acl.tag)
    host = acl.client(access.HOST)
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            host.hincrby(keys.wallet("PLR00000000000000000000000"), "ticket", 1_000_000)
    finally:
        host.close()
