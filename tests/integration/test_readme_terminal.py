"""README's terminal flow as a newcomer runs it: its lines, as written, run one by one in bash in a folder
laid out like a fresh clone (``.venv`` at the top) against a ``codemojex serve`` started by the test (as
``make run`` starts it). Also: serve keeps its embedded Redis on the data folder's port across restarts
(another one when that port is taken) and prints how to reach it; ``codemojex redis-url`` gives the
operator user's URL; ``echomq`` takes ``--redis-url`` as ``codemojex`` does.

The flow's ``RND…`` and ``PLR…`` are the ids the commands printed, as a reader substitutes them. Its
``lock`` line needs a proven hit: when position 1 is not one, the test locks a position the first guess
did prove (and moves the ``_`` of the next guess there), as the README tells the reader to; when the
first guess proved none, it first plays guesses of one key repeated until one hits, as a player would.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from codemojex import access
from echomq.testing.server import free_port
from tests.integration.test_serve import Serve

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent  # the venv running the tests: the clone's .venv
PLACEHOLDER_ROUND, PLACEHOLDER_PLAYER = "RND…", "PLR…"

pytestmark = pytest.mark.slow


def readme_flow() -> list[str]:
    """The command lines of README's "Play from the terminal" block, comments dropped."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### Play from the terminal", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = []
    for raw in block.splitlines():
        command = re.split(r"\s+#\s", raw, maxsplit=1)[0].strip()
        if command and not command.startswith("#"):
            lines.append(command)
    return lines


def clone(tmp_path: Path) -> Path:
    """A folder laid out as a fresh clone after ``make``: ``.venv`` at the top."""
    folder = tmp_path / "codemojex"
    folder.mkdir()
    (folder / ".venv").symlink_to(VENV, target_is_directory=True)
    return folder


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_URL", "CODEMOJEX_"))}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # no venv on PATH: the flow must put it there
    return env


class Shell:
    """Runs lines in bash in ``cwd``; the ``source`` and ``export`` lines seen so far run first, as in
    the reader's one terminal."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.prelude: list[str] = []

    def run(self, line: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        script = "\n".join([*self.prelude, line])
        done = subprocess.run(
            ["/bin/bash", "-c", script],
            cwd=self.cwd,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        if check:
            assert done.returncode == 0, f"{line!r} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        if line.startswith(("source ", "export ")):
            self.prelude.append(line)
        return done


def proven(shell: Shell, round_id: str, player_id: str) -> dict[int, str]:
    listed = json.loads(shell.run(f"codemojex --json guesses {round_id} {player_id}").stdout)
    return {int(position): key for position, key in listed["proven"].items()}


def test_the_readme_terminal_flow_runs_as_written(tmp_path):
    lines = readme_flow()
    assert lines[0] == "source .venv/bin/activate", "the flow starts by putting codemojex on PATH"
    assert lines[1] == 'export REDIS_URL="$(codemojex redis-url)"'
    folder = clone(tmp_path)
    port = free_port()
    serve = Serve(folder / ".codemojex-data", port, extra=("--no-proof",))
    try:
        serve.wait_up()
        assert 'export REDIS_URL="$(.venv/bin/codemojex redis-url)"' in serve.output, "serve says how"
        shell = Shell(folder)
        bare = subprocess.run(["/bin/bash", "-c", "command -v codemojex"], env=clean_env(), check=False)
        assert bare.returncode != 0, "codemojex is not on a fresh PATH: the flow activates the venv"
        round_id = player_id = ""
        outputs: dict[str, str] = {}
        for index, line in enumerate(lines):
            command = line.replace(PLACEHOLDER_ROUND, round_id).replace(PLACEHOLDER_PLAYER, player_id)
            if command.startswith("codemojex lock "):
                hits = proven(shell, round_id, player_id)
                probe = 0
                keyboard = ["🍎", "🍌", "🍇", "🍒", "🥝", "🍑", "🍍", "🥥"]
                while not hits:  # the first guess proved nothing: play as a reader would
                    key = keyboard[probe]
                    shell.run(f"codemojex guess {round_id} {player_id} {' '.join([key] * 6)} --wait 10")
                    probe += 1
                    hits = proven(shell, round_id, player_id)
                position = 1 if 1 in hits else min(hits)
                command = command.rsplit(" ", 1)[0] + f" {position}"
                following = lines[index + 1].split()
                assert following[:2] == ["codemojex", "guess"]
                keys = following[4:10]
                keys[0], keys[position - 1] = keys[position - 1], keys[0]  # the _ at the locked position
                lines[index + 1] = " ".join([*following[:4], *keys, *following[10:]])
            done = shell.run(command)
            outputs[line.split()[0] + " " + line.split()[1]] = done.stdout
            if line.startswith("codemojex round open"):
                round_id = re.search(r"RND\w{23}", done.stdout).group(0)  # type: ignore[union-attr]
            if line.startswith("codemojex player new"):
                player_id = re.search(r"PLR\w{23}", done.stdout).group(0)  # type: ignore[union-attr]
        assert "hits" in outputs["codemojex guess"], "the guess was scored by serve's worker"
        assert "bus cm" in outputs["echomq stats"]
        code = re.search(r"recovery\s+(\S+)", outputs["codemojex player"])
        assert code is not None, "player new prints a recovery code"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as anon:
            browser = anon.post("/api/recover", json={"code": code.group(1)})
        assert browser.status_code == 200, "the terminal's player plays on in the browser"
        assert browser.json()["player_id"] == player_id
        url = json.loads(shell.run("codemojex --json redis-url").stdout)["redis_url"]
        assert url.startswith(f"redis://{access.user_name(access.OPERATOR, 'cm')}:"), "the operator's user"
        assert serve.stop() == 0
    finally:
        serve.kill()


def test_serve_keeps_the_redis_port_of_its_data_folder_and_moves_when_it_is_taken(tmp_path):
    folder = clone(tmp_path)
    data_dir = folder / ".codemojex-data"

    def start() -> int:
        serve = Serve(data_dir, free_port(), extra=("--no-proof",))
        try:
            serve.wait_up()
            port = int(
                re.search(r"embedded redis-server on redis://127\.0\.0\.1:(\d+)/0", serve.output).group(1)
            )  # type: ignore[union-attr]
            assert serve.stop() == 0
        finally:
            serve.kill()
        return port

    first = start()
    assert (data_dir / "redis.port").read_text().strip() == str(first)
    assert start() == first, "the same port at the next start"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", first))
        squatter.listen()
        moved = start()
    assert moved != first, "the port was taken: another one"
    assert (data_dir / "redis.port").read_text().strip() == str(moved), "and that one is remembered"


def test_redis_url_without_a_served_folder_says_what_to_do(tmp_path):
    done = subprocess.run(
        [str(VENV / "bin" / "codemojex"), "redis-url", "--data-dir", str(tmp_path / "none")],
        env=clean_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "start `codemojex serve`" in done.stderr


def test_echomq_takes_redis_url_before_or_after_the_command(redis_server, tag):
    echomq = str(VENV / "bin" / "echomq")
    for argv in (
        [echomq, "--redis-url", redis_server.url, "--tag", tag, "stats", "--json"],
        [echomq, "stats", "--json", "--tag", tag, "--redis-url", redis_server.url],
    ):
        done = subprocess.run(argv, env=clean_env(), capture_output=True, text=True, check=False, timeout=30)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["tag"] == tag
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    done = subprocess.run(
        [echomq, "--redis-url", nowhere, "stats"],
        env=clean_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert nowhere.rsplit("/", 1)[0].split("//")[1] in done.stderr, "the error names the URL it was given"
