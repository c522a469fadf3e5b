"""The Lua scripts keep their written contracts: each header declares what the body and the caller use."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import pytest
import redis

from echomq import scripts as _scripts

LUA_DIR = resources.files("echomq").joinpath("lua")
ON_DISK = sorted(p.name[: -len(".lua")] for p in LUA_DIR.iterdir() if p.name.endswith(".lua"))
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


def _split(name: str) -> Script:
    text = _scripts.source(name)
    assert text.startswith("--[["), f"{name}.lua does not open with a --[[ ... ]] contract"
    end = text.index("]]")
    return Script(name, text[4:end], text[end + 2 :])


SCRIPTS = {name: _split(name) for name in _scripts.KEY_COUNTS}


def test_every_lua_file_is_registered_and_every_registered_script_exists():
    """The registry names exactly the scripts in echomq/lua, no more and no fewer."""
    assert sorted(_scripts.KEY_COUNTS) == ON_DISK


def test_source_refuses_an_unregistered_name():
    """_scripts.source raises KeyError for a name that is not in the registry."""
    with pytest.raises(KeyError):
        _scripts.source("no_such_script")


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_header_key_count_matches_the_registry(name):
    """Each header declares KEYS[1..n] once each, in order, and n is the registry's KEY_COUNTS."""
    declared = SCRIPTS[name].declared("KEYS")
    assert declared == list(range(1, len(declared) + 1))
    assert len(declared) == _scripts.KEY_COUNTS[name]


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
    assert re.search(r"Called by echomq\.\w+\.\w+", SCRIPTS[name].header)


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
