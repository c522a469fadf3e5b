"""The architecture stays visible: EchoMQ never imports Codemojex; the host and the score worker meet
only through the job payload; the pure game rules import neither Redis nor the queue."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


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


@pytest.mark.parametrize("path", sorted((SRC / "echomq").glob("*.py")), ids=lambda p: p.name)
def test_echomq_never_imports_codemojex(path):
    """The queue knows nothing of the game built on it."""
    assert not any(name.split(".")[0] == "codemojex" for name in imports_of(path))


def test_the_host_and_the_score_worker_do_not_import_each_other():
    """guesses (the host's admission) and score_worker (the authority) share only codemojex.payload."""
    host = imports_of(SRC / "codemojex" / "guesses.py")
    worker = imports_of(SRC / "codemojex" / "score_worker.py")
    assert "codemojex.score_worker" not in host
    assert "codemojex.guesses" not in worker
    assert "codemojex.payload" in host
    assert "codemojex.payload" in worker
