"""The getting-started page (docs/site/getting-started.md) works as written: its app module, a worker
started with its ``echomq ... worker app:tasks.handler`` command line, and its producer's script, against a
redis-server of the test's own (the page's URL is replaced by the test server's, nothing else)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "site" / "getting-started.md"
PAGE_URL = "redis://127.0.0.1:6379/0"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_page_runs_as_written(redis_server, tmp_path):
    app, producer = blocks("python")[0], blocks("python")[1]
    assert PAGE_URL in app
    (tmp_path / "app.py").write_text(app.replace(PAGE_URL, redis_server.url))
    (tmp_path / "produce.py").write_text(producer)
    command = next(line for block in blocks("console") for line in block.splitlines() if " worker " in line)
    argv = command.removeprefix("$ ").split()
    assert argv[:1] == ["echomq"]
    env = {**os.environ, "REDIS_URL": redis_server.url, "PYTHONPATH": str(tmp_path)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", *argv[1:]], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        out = subprocess.run(
            [sys.executable, "produce.py"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        worker.terminate()
        worker.communicate(timeout=30)  # waits, and closes its pipes
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "5"
