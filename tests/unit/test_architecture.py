"""The architecture stays visible: EchoMQ never imports Codemojex, and its library and worker never import
its test tools; the imports of a package run one way (no circles); the host and the score worker meet
only through the job payload; the pure game rules import neither Redis nor the queue."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# each package's source folder (two distributions: echomq at the root, codemojex in game/)
SOURCES = {"echomq": ROOT / "src", "codemojex": ROOT / "game" / "src"}
GAME = SOURCES["codemojex"] / "codemojex"


def imports_of(path: Path) -> set[str]:
    """Every module name ``path`` imports (absolute names; relative imports are not used)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name} uses a relative import"
            names.add(node.module or "")
    return names


def module_name(path: Path, src: Path) -> str:
    """The dotted name of the module at ``path`` under ``src`` (a package's ``__init__`` is the package)."""
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_of(package: str) -> dict[str, Path]:
    """Every module of ``package`` (its subpackages' too), by dotted name."""
    src = SOURCES[package]
    return {module_name(path, src): path for path in sorted((src / package).rglob("*.py"))}


def imported_modules(path: Path, known: Iterable[str]) -> set[str]:
    """The modules among ``known`` that ``path`` imports, wherever the import stands (under
    ``if TYPE_CHECKING:`` or in a function too): ``from pkg import name`` is ``pkg.name`` when that is a
    module, else ``pkg``; ``import a.b`` is ``a.b``."""
    known = set(known)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in known:
                    found.add(f"{node.module}.{alias.name}")
                elif node.module in known:
                    found.add(node.module)
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` and the modules of ``package`` it imports."""
    modules = modules_of(package)
    return {name: imported_modules(path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports in ``graph`` (its first module repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        path.append(module)
        for target in sorted(graph[module]):
            if cycle := visit(target):
                return cycle
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        if cycle := visit(module):
            return cycle
    return None


PACKAGES = ("echomq", "codemojex")


@pytest.mark.parametrize("package", PACKAGES)
def test_the_imports_of_a_package_run_one_way(package):
    """No module of the package imports itself back through others, not even for type checking only."""
    cycle = find_cycle(import_graph(package))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_a_circle_of_imports_is_found_and_named():
    """The checker itself: a circle comes back as the path that closes it."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(
    "path",
    sorted((SOURCES["echomq"] / "echomq").rglob("*.py")),
    ids=lambda p: str(p.relative_to(SOURCES["echomq"])),
)
def test_echomq_never_imports_codemojex(path):
    """The queue knows nothing of the game built on it."""
    assert not any(name.split(".")[0] == "codemojex" for name in imports_of(path))


def test_the_library_and_the_worker_never_import_the_test_tools():
    """echomq.testing (redis-server processes, a TCP cutter, invariants, slot migration) serves the tests,
    the benchmark and the conformance suite; only the demo of echomq.cli starts a server with it."""
    graph = import_graph("echomq")
    users = {
        module: sorted(target for target in targets if target.startswith("echomq.testing"))
        for module, targets in graph.items()
        if not module.startswith(("echomq.testing", "echomq.cli"))
    }
    assert {module: targets for module, targets in users.items() if targets} == {}


def test_the_host_and_the_score_worker_do_not_import_each_other():
    """guesses (the host's admission) and score_worker (the authority) share only codemojex.payload."""
    host = imports_of(GAME / "guesses.py")
    worker = imports_of(GAME / "score_worker.py")
    assert "codemojex.score_worker" not in host
    assert "codemojex.guesses" not in worker
    assert "codemojex.payload" in host
    assert "codemojex.payload" in worker


PURE = (
    "codemojex.engine",
    "codemojex.emoji",
    "codemojex.keyboard",
    "codemojex.codes",
    "codemojex.ranking",
    "codemojex.names",
    "codemojex.errors",
    "codemojex.economy",
    "codemojex.hints",
    "codemojex.streaks",
)


@pytest.mark.parametrize("module", PURE)
def test_importing_a_pure_game_module_loads_no_redis_and_no_queue(module):
    """In a fresh interpreter, the pure rules import neither redis nor echomq, even through the package."""
    loaded = "sorted(m for m in sys.modules if m.split('.')[0] in ('redis', 'echomq'))"
    probe = f"import sys, {module}; print({loaded})"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_the_public_names_of_codemojex_resolve_to_their_modules():
    """Every name in codemojex.__all__ is importable from the package, and it is the module's own."""
    import codemojex  # noqa: PLC0415  (the package itself is the subject)

    assert sorted(codemojex.__all__) == sorted(codemojex._HOME_OF)
    for name in codemojex.__all__:
        value = getattr(codemojex, name)
        assert value is getattr(importlib.import_module(codemojex._HOME_OF[name]), name)
    with pytest.raises(AttributeError):
        _ = codemojex.no_such_name


GAME_MODULES = sorted(p for p in GAME.glob("*.py") if p.name != "serve.py")


@pytest.mark.parametrize("path", GAME_MODULES, ids=lambda p: p.name)
def test_the_game_never_imports_the_web_layer(path):
    """The web layer is a client of the game: nothing of the game imports it (serve, which runs the
    host, is the one exception) and the game imports no web framework."""
    names = imports_of(path)
    assert not any(name.startswith("codemojex.web") for name in names)
    assert not any(name.split(".")[0] in {"fastapi", "starlette", "uvicorn"} for name in names)


@pytest.mark.parametrize("path", sorted((GAME / "web").glob("*.py")), ids=lambda p: p.name)
def test_the_web_host_never_scores(path):
    """The host admits and reads; scoring (and the engine) belongs to the score worker alone."""
    names = imports_of(path)
    assert "codemojex.score_worker" not in names
    assert not any(name == "codemojex.engine" and path.name != "views.py" for name in names)  # types only


def test_find_cycle_names_the_circle_or_none():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"d"}, "d": {"c"}}) == ["c", "d", "c"]


def test_the_import_graph_counts_type_checking_imports_and_resolves_from_imports():
    graph = import_graph("codemojex")
    assert "codemojex.web.hub" in graph["codemojex.web.host"]  # under `if TYPE_CHECKING:`
    assert "codemojex.web.views" in graph["codemojex.web.notices"]  # `from codemojex.web import views`
    assert "codemojex.conformance" in graph["codemojex.cli.processes"]  # `... conformance import KINDS`
