"""Long work says how it goes on a terminal (import, reindex, backup: how far, how fast, about
how long is left) and says nothing more on a pipe or with --quiet, where the result line alone
is read."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from aml_retriever.progress import Progress

ROOT = Path(__file__).resolve().parent.parent


def export_file(tmp_path: Path, lines: int) -> Path:
    path = tmp_path / "in.ndjson"
    with path.open("w") as out:
        for i in range(lines):
            out.write(json.dumps({"user_id": f"u{i % 3}", "request_id": f"r{i}", "session_id": "s",
                                  "messages": [{"role": "user", "content": f"note {i}",
                                                "timestamp": 1_700_000_000_000 + i}]}) + "\n")
    return path


def on_a_terminal(argv: list[str]) -> tuple[int, str, str]:
    """Run the command line with stderr on a pseudo-terminal; its exit status, stdout, stderr."""
    leader, follower = pty.openpty()
    done = subprocess.Popen([sys.executable, "-m", "aml_retriever", *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal's other end closed: the command ended
            break
        if not chunk:
            break
        seen += chunk
    out = done.stdout.read().decode() if done.stdout else ""
    os.close(leader)
    return done.wait(timeout=120), out, seen.decode(errors="replace")


@pytest.mark.parametrize("command", ["import", "reindex", "backup"])
def test_long_work_shows_its_progress_on_a_terminal_only(tmp_path: Path, command: str) -> None:
    db = tmp_path / "aml.db"
    source = export_file(tmp_path, 300)
    argv = {"import": ["import", "--db", str(db), "--in", str(source)],
            "reindex": ["reindex", "--db", str(db)],
            "backup": ["backup", "--db", str(db), "--to", str(tmp_path / "copy")]}[command]
    if command != "import":
        assert subprocess.run([sys.executable, "-m", "aml_retriever", "import", "--db", str(db),
                               "--in", str(source)], cwd=ROOT, capture_output=True).returncode == 0
    status, out, terminal = on_a_terminal(argv)
    assert status == 0 and json.loads(out)["success"] is True
    unit = {"import": "300 of 300 lines", "reindex": "3 of 3 users", "backup": "3 of 3 user files"}
    assert f"{command}: {unit[command]}" in terminal and "a second" in terminal
    # The control: on a pipe, and with --quiet on a terminal, the result line alone.
    if command == "backup":
        argv[-1] = str(tmp_path / "copy2")
    piped = subprocess.run([sys.executable, "-m", "aml_retriever", *argv], cwd=ROOT,
                           capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == ""
    if command == "backup":
        argv[-1] = str(tmp_path / "copy3")
    assert on_a_terminal([*argv, "--quiet"])[2] == ""


def test_the_line_says_how_far_how_fast_and_how_long_is_left() -> None:
    shown = Progress("import", "lines", 20_000, stream=io.StringIO())
    assert shown.line(12_000, 6.5) == "import: 12,000 of 20,000 lines, 1,846 a second, about 4 s left"
    assert shown.line(20_000, 10.0) == "import: 20,000 of 20,000 lines, 2,000 a second"
    assert shown.line(0, 0.0) == "import: 0 of 20,000 lines"
