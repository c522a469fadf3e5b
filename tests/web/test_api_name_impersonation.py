"""Name impersonation against a real host (issue 12, adversary): a look-alike of a held name, built
from letters of other scripts that render as the Latin ones (Unicode TR39 confusables the first table
missed: Armenian, Cherokee, further Cyrillic and Greek letters, Latin small capitals and IPA letters),
is the held name: 409 ``name_taken``. A name that merely shares letters is still free."""

from __future__ import annotations

import dataclasses

import pytest

from codemojex.web.admission import Limits
from codemojex.web.buckets import Rate
from tests.support.web import error_code

HELD = ("Bob", "Ada", "Hugo", "Wendy", "Clive")
LOOKALIKES = (
    "B\u0585b",  # Armenian small oh
    "A\u0501a",  # Cyrillic komi de
    "Ad\u0251",  # Latin small alpha
    "\u13aa\u13a0\u13aa",  # Cherokee A D A (ADA)
    "\u04bbugo",  # Cyrillic shha
    "Hu\u0261o",  # Latin script g
    "\u051dendy",  # Cyrillic we
    "Wend\u04af",  # Cyrillic straight u
    "\u13dfli\u0475e",  # Cherokee tli, Cyrillic izhitsa
    "C\u04cfive",  # Cyrillic palochka
    "Cl\u0131ve",  # Latin dotless i
    "\u1d04live",  # Latin small capital c
    "\u13df\u13de\u13a5\u13d9\u13ac",  # Cherokee C L i V E
)


@pytest.fixture
def host_config(host_config):
    return dataclasses.replace(host_config, limits=Limits(signup_per_address=Rate(100, 1)))


def test_a_name_built_of_lookalike_letters_is_the_name_it_passes_for(served, anon):
    for name in HELD:
        assert anon.post("/api/players", json={"name": name}).status_code == 201
    let_in = []
    for name in LOOKALIKES:
        reply = anon.post("/api/players", json={"name": name})
        if reply.status_code != 409 or error_code(reply) != "name_taken":
            let_in.append((name, reply.status_code))
    assert let_in == []
    assert anon.post("/api/players", json={"name": "Bobby"}).status_code == 201  # the test can pass
