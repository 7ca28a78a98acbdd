"""A new user's first run: the README's commands work as pasted, in a fresh copy of the checkout,
and the two READMEs show the same commands."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

from conftest import Client, free_port

from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_add

ROOT = Path(__file__).resolve().parent.parent
README_URL = "http://127.0.0.1:8080"


def code_lines(readme: str) -> list[str]:
    """Every command line of the README's bash and json blocks, comments dropped, in order."""
    out = []
    for body in re.findall(r"```(?:bash|json)\n(.*?)```", (ROOT / readme).read_text(), re.S):
        for line in body.splitlines():
            code = re.sub(r"\s+#\s.*$", "", line).rstrip()
            if code and not code.lstrip().startswith("#"):
                out.append(code)
    return out


def fresh_copy(tmp_path: Path) -> Path:
    """What a clone holds that the commands run: the package and the scripts."""
    clone = tmp_path / "clone"
    for part in ("aml_retriever", "scripts"):
        shutil.copytree(ROOT / part, clone / part, ignore=shutil.ignore_patterns("__pycache__"))
    return clone


def test_both_readmes_show_the_same_commands_in_the_same_order():
    english, chinese = code_lines("README.md"), code_lines("README.zh.md")
    assert len(english) > 40
    assert english == chinese


def test_readme_replay_runs_as_pasted_in_a_fresh_copy(tmp_path, app):
    """The Evaluation block's last two lines: the first writes what the replay reads."""
    lines = code_lines("README.md")
    replay = next(line for line in lines if line.startswith("python3 scripts/replay.py"))
    writer = lines[lines.index(replay) - 1]
    assert "--write-data eval_out/replay/" in writer and "--replay eval_out/replay/" in replay
    clone = fresh_copy(tmp_path)
    for line in (writer, replay.replace(README_URL, app.url)):
        done = subprocess.run(["bash", "-c", line], cwd=clone, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((clone / "eval_out" / "replay-server.json").read_text())
    assert result["summary"]["groups"]["all"]["n"] > 20
    assert result["search"]["contract_violations"] == {}


def test_replay_without_its_files_says_how_to_make_them(tmp_path):
    clone = fresh_copy(tmp_path)
    (clone / "eval_out" / "empty").mkdir(parents=True)
    for folder in ("eval_out/replay/", "eval_out/empty/"):
        done = subprocess.run(["python3", "scripts/replay.py", "--url", README_URL, "--replay",
                               folder], cwd=clone, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert done.stderr.startswith(f"replay: {folder}") and "--write-data DIR" in done.stderr


def use_it_block(readme: str) -> str:
    """The README's "Use it" block (the one that starts the server) as a user pastes it."""
    text = (ROOT / readme).read_text()
    start = text.index("```bash\n./scripts/serve.sh --port 8080 &\n") + len("```bash\n")
    return text[start:text.index("```", start)]



def test_the_quick_start_prints_its_answers_when_pasted(tmp_path):
    """Pasted whole, the block waits for the server to listen (it needs about a second) and every
    curl prints its answer; before the wait, every curl exited 7 and printed nothing."""
    block = use_it_block("README.md").replace("8080", str(free_port()))
    clone = fresh_copy(tmp_path)
    done = subprocess.run(["bash", "-c", block + "\nkill $!\nwait\n"], cwd=clone,
                          capture_output=True, text=True, timeout=120)
    assert '"success": true' in done.stdout and '"stored": 1' in done.stdout
    assert '"content": "The launch date moved to August 14, 2026."' in done.stdout
    assert '"status": "ok"' in done.stdout
    assert "curl:" not in done.stderr  # no refused connection


def test_the_key_workflow_shows_the_key_and_keeps_it_off_the_process_list(tmp_path):
    """The README's key block, pasted: the key is printed, the server started with it from the
    environment (not on its command line), and the curl that sends it is answered."""
    text = (ROOT / "README.md").read_text()
    start = text.index('export AML_API_KEY="$(openssl rand -hex 16)"')
    port = str(free_port())
    block = text[start:text.index("```", start)].replace("8081", port)
    assert "--api-key" not in block
    clone = fresh_copy(tmp_path)
    done = subprocess.run(["bash", "-c", block + "\nkill $!\nwait\n"], cwd=clone,
                          capture_output=True, text=True, timeout=120)
    key = re.search(r"API key: ([0-9a-f]{32})", done.stdout)
    assert key, done.stdout + done.stderr
    assert '"users"' in done.stdout and "curl:" not in done.stderr


def readme_block(first: str) -> str:
    """The README's bash block that opens with the line `first`."""
    text = (ROOT / "README.md").read_text()
    start = text.index("```bash\n" + first) + len("```bash\n")
    return text[start:text.index("```", start)]


def run_block(block: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "-c", block], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_whole_store_is_restored_from_its_backup_as_the_readme_says(tmp_path):
    with closing(MemoryService.open(str(tmp_path / "aml.db"))) as service:
        service.add(parse_add({"user_id": "user-1", "request_id": "r1", "session_id": "s1", "messages": [
            {"role": "user", "content": "Kept in the backup."}]}, 200))
    assert run_block("python3 -m aml_retriever backup --db ./aml.db --to ./backups/today",
                     tmp_path).returncode == 0
    with closing(MemoryService.open(str(tmp_path / "aml.db"))) as service:  # after the backup
        service.delete_user("user-1")
        service.add(parse_add({"user_id": "user-2", "request_id": "r1", "session_id": "s1", "messages": [
            {"role": "user", "content": "Said after the backup."}]}, 200))
        assert texts(service, "user-1") == []  # control: lost before the restore
    done = run_block(readme_block("mkdir -p ./replaced"), tmp_path)
    assert done.returncode == 0 and "FAIL" not in done.stdout, done.stdout + done.stderr
    with closing(MemoryService.open(str(tmp_path / "aml.db"))) as service:
        assert texts(service, "user-1") == ["Kept in the backup."]
        assert texts(service, "user-2") == []
    with closing(MemoryService.open(str(tmp_path / "replaced" / "aml.db"))) as service:
        assert texts(service, "user-2") == ["Said after the backup."]  # moved aside, not lost


def test_one_user_is_restored_beside_a_running_server_as_the_readme_says(tmp_path, app):
    c = Client(app.port)
    assert c.add("user-1", "r1", ["Kept in the backup."]).status == 200
    assert c.add("user-2", "r1", ["Another user, untouched."]).status == 200
    assert run_block("python3 -m aml_retriever backup --db ./aml.db --to ./backups/today",
                     tmp_path).returncode == 0
    assert c.add("user-1", "r2", ["Said after the backup."]).status == 200
    assert c.add("user-2", "r2", ["Also after the backup."]).status == 200
    done = run_block(readme_block("python3 -m aml_retriever export --db ./backups/today")
                     .replace(README_URL, f"http://127.0.0.1:{app.port}"), tmp_path)
    assert done.returncode == 0, done.stderr

    def held(user: str) -> list[str]:
        return [m["content"] for m in c.request("GET", f"/users/{user}/messages").body["messages"]]

    assert held("user-1") == ["Kept in the backup."]
    assert sorted(held("user-2")) == ["Also after the backup.", "Another user, untouched."]  # control
    c.close()


def texts(service: MemoryService, user: str) -> list[str]:
    """A user's messages as stored, oldest first ([] when the user has no file)."""
    path = service.store.shard_path(user)
    if not path.exists():
        return []
    with closing(sqlite3.connect(path)) as conn:
        return [text for (text,) in conn.execute("SELECT content FROM messages ORDER BY id")]
