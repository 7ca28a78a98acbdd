"""An interpreter older than 3.11 (macOS's own python3 is 3.9) gets one line naming the Python
needed at every entry point, not an ImportError traceback from deep inside the package. Runs the
older interpreters pyenv holds on this machine; skips, saying so, where there are none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
OLD = sorted(str(p) for p in PYENV.glob("3.*/bin/python")
             if tuple(map(int, p.parent.parent.name.split(".")[:2])) < (3, 11))


@pytest.mark.skipif(not OLD, reason=f"no Python older than 3.11 under {PYENV} (pyenv install 3.9)")
@pytest.mark.parametrize("python", OLD)
@pytest.mark.parametrize("argv", [["check"], ["--version"], ["serve", "--port", "0"],
                                  ["mcp", "--project-root", "."]])
def test_an_old_python_is_told_what_it_needs(python: str, argv: list[str]) -> None:
    done = subprocess.run([python, "-m", "aml_retriever", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("aml_retriever needs Python 3.11 or newer; this is Python 3.")
    assert len(done.stderr.splitlines()) == 1


def test_this_python_is_not_refused() -> None:
    """The control: the interpreter the suite runs on answers."""
    done = subprocess.run([sys.executable, "-m", "aml_retriever", "--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("aml_retriever ")
