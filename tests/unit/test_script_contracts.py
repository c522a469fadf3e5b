"""The Lua scripts keep their written contracts: each header declares what the body and the caller use.

Both libraries are held to it: EchoMQ's own scripts and the game's (codemojex), which include EchoMQ's
admission and finish helpers and their own (the ledger's bound).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import pytest
import redis

from codemojex.game import LIBRARY as GAME
from echomq import scripts as _scripts

LIBRARIES = {"echomq": _scripts.ECHOMQ, "codemojex": GAME}


def _on_disk(package: str) -> list[str]:
    lua_dir = resources.files(package).joinpath("lua")
    return sorted(p.name[: -len(".lua")] for p in lua_dir.iterdir() if p.name.endswith(".lua"))


DECLARED = re.compile(r"^\s*(KEYS|ARGV)\[(\d+)\]\s+\S", re.MULTILINE)
USED = re.compile(r"\b(KEYS|ARGV)\[([^\]]*)\]")


@dataclass(frozen=True)
class Script:
    name: str
    header: str
    body: str

    def declared(self, kind: str) -> list[int]:
        return [int(n) for k, n in DECLARED.findall(self.header) if k == kind]

    def used(self, kind: str) -> list[str]:
        return [n for k, n in USED.findall(self.body) if k == kind]


def _split(library: _scripts.Library, name: str) -> Script:
    text = library.source(name)
    assert text.startswith("--[["), f"{name}.lua does not open with a --[[ ... ]] contract"
    end = text.index("]]")
    return Script(name, text[4:end], text[end + 2 :])


SCRIPTS = {
    f"{package}:{name}": _split(library, name)
    for package, library in LIBRARIES.items()
    for name in library.counts
}
COUNTS = {
    f"{package}:{name}": n for package, library in LIBRARIES.items() for name, n in library.counts.items()
}


@pytest.mark.parametrize("package", sorted(LIBRARIES))
def test_every_lua_file_is_registered_and_every_registered_script_exists(package):
    """Each registry names exactly the scripts in its package's lua/, no more and no fewer."""
    assert sorted(LIBRARIES[package].counts) == _on_disk(package)


def test_includes_are_expanded_and_unknown_ones_refused():
    """An @include line becomes the include's text, an include's own includes too (finish includes trim);
    no script is sent with an include line left."""
    for script in SCRIPTS.values():
        assert "@include" not in script.body
    assert "local function admit_new" in _scripts.source("enqueue")
    assert "local function fence" in GAME.source("score")
    for name in ("complete", "fail", "sweep"):
        assert _scripts.source(name).count("local function trim_expired") == 1
    assert GAME.source("score").count("local function trim_expired") == 1
    for bad in ("nope", "../claim", "Admit"):
        with pytest.raises(KeyError):
            _scripts.include(bad)


def test_a_package_includes_its_own_includes_and_only_its_own():
    """codemojex's scripts include its lua/includes/ledger.lua (the ledger's one trim) besides EchoMQ's;
    EchoMQ's own lookup does not see another package's includes."""
    for name in ("submit", "credit", "retire"):
        assert GAME.source(name).count("local function carry_ledger") == 1
    assert "local function admit_new" in GAME.source("submit")
    assert "local function carry_ledger" in _scripts.include("ledger", "codemojex")
    with pytest.raises(KeyError):
        _scripts.include("ledger")
    with pytest.raises(KeyError):
        _scripts.include("nope", "codemojex")


def test_source_refuses_an_unregistered_name():
    """_scripts.source raises KeyError for a name that is not in the registry."""
    with pytest.raises(KeyError):
        _scripts.source("no_such_script")


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_header_key_count_matches_the_registry(name):
    """Each header declares KEYS[1..n] once each, in order, and n is the registry's KEY_COUNTS."""
    declared = SCRIPTS[name].declared("KEYS")
    assert declared == list(range(1, len(declared) + 1))
    assert len(declared) == COUNTS[name]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_header_documents_argv_in_order(name):
    """Each header declares ARGV[1..m] once each, in order, under its Input section."""
    script = SCRIPTS[name]
    declared = script.declared("ARGV")
    assert declared, f"{name}.lua declares no ARGV"
    assert declared == list(range(1, len(declared) + 1))
    assert "Input:" in script.header


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_header_documents_the_output(name):
    """Each header has an Output section with at least one documented reply."""
    header = SCRIPTS[name].header
    assert "Output:" in header
    after = header.split("Output:", 1)[1]
    assert any(line.strip() for line in after.splitlines())


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_header_names_its_caller(name):
    """Each header says which Python function runs it (the file is named after that function)."""
    package = name.split(":")[0]
    assert re.search(rf"Called by {package}\.\w+\.\w+", SCRIPTS[name].header)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_body_uses_only_declared_keys_and_args(name):
    """Every KEYS[n] and ARGV[n] in the body is a literal index that the header declares."""
    script = SCRIPTS[name]
    for kind in ("KEYS", "ARGV"):
        used = script.used(kind)
        assert all(n.isdigit() for n in used), f"{name}.lua indexes {kind} with {used}"
        assert {int(n) for n in used} <= set(script.declared(kind))


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_body_binds_every_declared_key_and_arg(name):
    """Every declared KEYS[n] and ARGV[n] is read by the body (no stale documentation)."""
    script = SCRIPTS[name]
    for kind in ("KEYS", "ARGV"):
        assert {int(n) for n in script.used(kind)} == set(script.declared(kind))


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_keys_and_args_are_bound_to_named_locals_on_the_first_lines(name):
    """KEYS and ARGV are read only in the opening block of local bindings, never further down."""
    lines = SCRIPTS[name].body.strip("\n").splitlines()
    block = 0
    while block < len(lines) and (lines[block].startswith("local ") or lines[block].startswith("  ")):
        block += 1
    assert block > 0
    for number, line in enumerate(lines[block:], start=block):
        assert not USED.search(line), f"{name}.lua reads KEYS/ARGV outside its bindings: {number}: {line}"


def test_registry_refuses_a_call_with_the_wrong_key_count():
    """Running a script with a key list of the wrong length fails before anything is sent."""
    client = redis.Redis(port=1)  # never connected: the check happens before any command
    scripts = _scripts.SyncScripts(client)
    with pytest.raises(AssertionError, match=f"takes {_scripts.KEY_COUNTS['claim']} keys"):
        scripts.get("claim", ["only-one"])
    client.close()
