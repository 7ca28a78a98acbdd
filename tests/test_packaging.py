"""What ships beside the package: the version in one place, the console script `pip install .`
makes, scripts/serve.sh, the Docker entrypoint, health check and the Dockerfile's promises
(parsed here; no Docker daemon is needed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import free_port

from aml_retriever import __version__
from aml_retriever.cli import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = ROOT / "scripts" / "docker-entrypoint.sh"
HEALTHCHECK = ROOT / "scripts" / "docker-healthcheck.py"
SERVE = ROOT / "scripts" / "serve.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ENTRYPOINT), *args], capture_output=True, text=True, timeout=60)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without AML_* settings (a developer's own must not leak in), plus extra."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("AML_")}, **extra}



@contextmanager
def serving(argv: list[str], cwd: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """A server command as a process of its own, until it logs that it serves; SIGTERM after."""
    log = cwd / f"server-{time.monotonic_ns()}.log"
    with open(log, "w") as handle:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=handle, text=True)
    try:
        deadline = time.monotonic() + 30
        while "serving on" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


# ---- one version -----------------------------------------------------------------------------


def test_the_version_is_written_once_and_reported_everywhere():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert 'version = {attr = "aml_retriever.__version__"}' in pyproject
    assert not re.search(r'(?m)^version\s*=\s*"', pyproject)  # no second, static copy
    done = subprocess.run([sys.executable, "-m", "aml_retriever", "--version"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.stdout.strip() == f"aml_retriever {__version__}"
    spec = json.loads((ROOT / "aml_retriever" / "http" / "openapi.json").read_text())
    assert spec["info"]["version"] == __version__
    health = f'{{"status": "ok", "version": "{__version__}"}}'
    for doc in ("README.md", "README.zh.md", "docs/API_CONTRACT.md"):
        assert health in (ROOT / doc).read_text(), doc


def test_the_changelog_has_unreleased_then_dated_versions_newest_first():
    headings = re.findall(r"(?m)^## (.+)$", (ROOT / "docs" / "changelog.md").read_text())
    assert headings[0] == "Unreleased"
    versions = [re.fullmatch(r"(\d+)\.(\d+)\.(\d+) \((\d{4}-\d{2}-\d{2})\)", h) for h in headings[1:]]
    assert versions and all(versions), headings
    numbers = [tuple(int(m.group(i)) for i in (1, 2, 3)) for m in versions if m]
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) == len(numbers)
    assert ".".join(map(str, numbers[0])) == __version__  # the newest released is the package's
    assert numbers[-1] == (0, 1, 0)


# ---- pip install . ---------------------------------------------------------------------------


def test_pip_install_gives_the_aml_retriever_command(tmp_path):
    """The README's `pip install .` route, as pasted (pip fetches the build tools, setuptools, into
    an isolated build environment), into a virtual environment, from a copy of the checkout; the
    command then runs from elsewhere."""
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", "build", "eval_out", "bench_out", "*.db*"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    installed = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                                str(source)], capture_output=True, text=True, timeout=300,
                               cwd=tmp_path)
    if installed.returncode != 0 and re.search(r"No matching distribution|Could not find a "
                                                r"version|connection|Network", installed.stderr):
        pytest.skip("pip cannot fetch the build tools (setuptools, wheel): offline?")
    assert installed.returncode == 0, installed.stderr
    command = env_dir / "bin" / "aml-retriever"
    away = tmp_path / "elsewhere"
    away.mkdir()

    def call(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, cwd=away,
                              env=clean_env(PYTHONPATH=""))

    assert call(str(command), "--version").stdout.strip() == f"aml_retriever {__version__}"
    helped = call(str(command), "stats", "--help").stdout
    assert helped.startswith("usage: aml-retriever stats") and "aml-retriever stats --db" in helped
    assert "python3 -m aml_retriever" not in helped
    assert call(str(command), "check").returncode == 0
    # The module route names itself as it was started, and the evaluation package ships too.
    assert call(str(python), "-m", "aml_retriever", "--help").stdout.startswith(
        "usage: python3 -m aml_retriever")
    where = call(str(python), "-c", "import aml_retriever.evaluation.metrics as m; print(m.__file__)")
    assert str(env_dir) in where.stdout, where.stderr
    # The files a server serves without docs/: the inspector page and the OpenAPI document.
    shipped = call(str(python), "-c", "from importlib import resources; h = resources.files("
                   "'aml_retriever.http'); print(h.joinpath('openapi.json').is_file(), "
                   "h.joinpath('ui', 'app.js').is_file())")
    assert shipped.stdout.split() == ["True", "True"], shipped.stderr
    # The neighbour words of the `related` signal, read from the installed copy.
    related = call(str(python), "-c", "from aml_retriever.analysis import related; "
                   "print(related.DATA_FILE.is_file(), str(related.DATA_FILE).startswith("
                   f"{str(env_dir)!r}), 'violins' in related.neighbours('instruments'))")
    assert related.stdout.split() == ["True", "True", "True"], related.stderr


def test_help_names_the_program_as_it_was_started(capsys):
    from aml_retriever.cli import console, main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    module_help = capsys.readouterr().out
    assert module_help.startswith("usage: python3 -m aml_retriever serve")
    saved = sys.argv
    sys.argv = ["aml-retriever", "serve", "--help"]
    try:
        with pytest.raises(SystemExit):
            console()
    finally:
        sys.argv = saved
    console_help = capsys.readouterr().out
    assert console_help.startswith("usage: aml-retriever serve")
    assert "  aml-retriever serve --port 8080" in console_help
    assert "python3 -m aml_retriever" not in console_help


# ---- scripts/serve.sh ------------------------------------------------------------------------


def test_serve_sh_keeps_a_relative_db_in_the_callers_directory(tmp_path):
    caller = tmp_path / "caller"
    caller.mkdir()
    before = set(ROOT.iterdir())
    with serving(["bash", str(SERVE), "--port", "0", "--db", "./mine.db"], caller, clean_env()):
        assert (caller / "mine.db").is_file()
    assert not (ROOT / "mine.db").exists() and set(ROOT.iterdir()) == before
    with serving(["bash", str(SERVE), "--port", "0"], caller, clean_env()):  # the default ./aml.db
        assert (caller / "aml.db").is_file()


# ---- Docker: entrypoint, health check, Dockerfile ----------------------------------------------


def test_entrypoint_runs_cli_commands_through_the_package():
    result = run("check")
    assert result.returncode == 0 and "FTS5" in result.stdout
    config = run("print-config", "--port", "9")
    assert json.loads(config.stdout)["port"] == {"value": 9, "from": "flag"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_entrypoint_runs_every_command_of_the_cli(command):
    result = run(command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python3 -m aml_retriever {command}")


def test_entrypoint_runs_anything_else_as_given_and_serves_by_default():
    result = run("echo", "hello")
    assert result.returncode == 0 and result.stdout == "hello\n"
    assert run("--version").stdout.strip() == f"aml_retriever {__version__}"
    unknown = run("no-such-program-here")
    assert unknown.returncode == 127 and "not found" in unknown.stderr  # not sent to the CLI
    assert "\n[ $# -gt 0 ] || set -- serve\n" in ENTRYPOINT.read_text()


def test_entrypoint_passes_exit_codes_through():
    assert run("print-config", "--config", "/nonexistent/aml.json").returncode == 1
    assert run("print-config", "--workers", "0").returncode == 2


def health(pid: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HEALTHCHECK), "--pid", str(pid)],
                          capture_output=True, text=True, timeout=60, env=clean_env(AML_PORT="1"))


def test_healthcheck_probes_the_port_the_server_was_started_with(tmp_path):
    """A flag beats the environment (AML_PORT names a port nobody serves), as in `serve`; the
    environment and a config file are read too; a stopped server is unhealthy."""
    flag_port, env_port, file_port = free_port(), free_port(), free_port()
    with serving([str(ENTRYPOINT), "serve", "--port", str(flag_port), "--db", "a.db"], tmp_path,
                 clean_env(AML_PORT=str(env_port))) as server:
        checked = health(server.pid)
        assert checked.returncode == 0, checked.stderr
    stopped = health(server.pid)
    assert stopped.returncode == 1 and "unhealthy" in stopped.stderr
    with serving([str(ENTRYPOINT), "serve", "--db", "b.db"], tmp_path,
                 clean_env(AML_PORT=str(env_port))) as server:
        assert health(server.pid).returncode == 0
    (tmp_path / "c.json").write_text(json.dumps({"port": file_port}))
    with serving([str(ENTRYPOINT), "serve", "--config", "c.json", "--db", "c.db"], tmp_path,
                 clean_env()) as server:
        assert health(server.pid).returncode == 0
    not_a_server = health(os.getpid())
    assert not_a_server.returncode == 1 and "not `python3 -m aml_retriever serve`" in not_a_server.stderr


def test_healthcheck_finds_the_server_under_an_init_process(tmp_path):
    sys.path.insert(0, str(HEALTHCHECK.parent))
    try:
        import importlib

        probe = importlib.import_module("docker-healthcheck")
    finally:
        sys.path.remove(str(HEALTHCHECK.parent))
    for pid, argv in ((1, ["/sbin/docker-init", "--", "./scripts/docker-entrypoint.sh"]),
                      (7, ["python3", "-m", "aml_retriever", "mcp", "--project-root", "/data"]),
                      (12, ["python3", "-m", "aml_retriever", "serve", "--port", "9000"]),
                      (15, ["python3", "-m", "aml_retriever", "serve", "--port", "9000"])):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    assert probe.find_server(tmp_path) == 12  # the lowest serve: with --processes, the parent
    (tmp_path / "12" / "cmdline").write_bytes(b"bash\0")
    (tmp_path / "15" / "cmdline").write_bytes(b"bash\0")
    assert probe.find_server(tmp_path) is None  # an MCP container has nothing to probe


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            out.append((keyword.upper(), " ".join(rest.split())))
    return out


def test_dockerfile_makes_the_user_before_copying_and_serves_as_it():
    steps = dockerfile_instructions()
    kinds = [k for k, _ in steps]
    assert steps[:2] == [("ARG", "BASE=python:3.11-slim"), ("FROM", "${BASE}")]  # the published base
    useradd = next(i for i, (k, a) in enumerate(steps) if k == "RUN" and "useradd" in a)
    assert "--uid 10001 aml" in steps[useradd][1] and "chown aml:aml /data" in steps[useradd][1]
    assert useradd < kinds.index("COPY") < kinds.index("USER")
    assert ("USER", "aml") in steps and ("VOLUME", '["/data"]') in steps
    assert steps[-2:] == [("ENTRYPOINT", '["./scripts/docker-entrypoint.sh"]'), ("CMD", '["serve"]')]


def test_dockerfile_health_check_reads_the_configured_port():
    (check,) = [a for k, a in dockerfile_instructions() if k == "HEALTHCHECK"]
    assert check.endswith('CMD ["python3", "/app/scripts/docker-healthcheck.py"]')
    assert "8080" not in check
    assert HEALTHCHECK.is_file() and os.access(HEALTHCHECK, os.X_OK)


def test_docs_say_a_mounted_directory_must_be_writable_by_uid_10001():
    assert "writable by uid 10001" in (ROOT / "Dockerfile").read_text()
    assert "writable by uid 10001" in (ROOT / "README.md").read_text()
    assert "对 uid 10001 可写" in (ROOT / "README.zh.md").read_text()


def _docker_ignores(path: str, patterns: list[str]) -> bool:
    """Whether a .dockerignore's patterns leave `path` (relative to the context) out, as the
    builder matches them: a pattern from the context's root, `*` within a name, `**` across
    folders, a folder matched with all it holds."""
    def regex(pattern: str) -> str:
        out = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*")
        return out.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    return any(re.fullmatch(regex(p), prefix) for p in patterns for prefix in prefixes)


def test_dockerignore_keeps_what_the_readme_makes_out_of_the_image():
    """Followed in order, the README leaves a store, its user files, an export, an import's
    store, a backup, a cluster's stores and an agent's memory in the checkout; an image built
    afterwards holds none of them, at the root or below, and still holds the package."""
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    made = ["aml.db", "aml.db-wal", "aml.db.users/ab/abcdef.db", "user-1.ndjson",
            "restored.db", "restored.db.users/01/0123.db", "backups/today/aml.db",
            "backups/today/aml.db.users/ab/abcdef.db", "cluster/shard-0/aml.db",
            "cluster/haproxy.cfg", ".aml/memory.db", "deep/down/store.db", "deep/x.ndjson",
            "eval_out/replay-server.json", "bench_out/add.json", ".git/HEAD"]
    kept = ["aml_retriever/__init__.py", "aml_retriever/cluster/control.py", "scripts/serve.sh",
            "deploy/haproxy.cfg", "Dockerfile",
            "pyproject.toml", "README.md"]
    assert [p for p in made if not _docker_ignores(p, patterns)] == []
    assert [p for p in kept if _docker_ignores(p, patterns)] == []


def test_the_test_extra_lists_what_run_tests_installs():
    """`pip install -e '.[test]'` installs the packages scripts/run_tests.sh installs with pip
    (it listed 4 of the 8), so a virtual environment made either way runs every test."""
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    named = {re.split(r"[<>=\\[]", requirement)[0] for requirement in extra}
    script = (ROOT / "scripts" / "run_tests.sh").read_text()
    installed = set(re.findall(r"missing\+=\((\w+)\)", script)) | {
        package for line in re.findall(r"pip_install ([\w .-]+?)(?: 2>| *$)", script, re.M)
        for package in line.split() if package != '"${missing[@]}"'}
    assert installed == {"pytest", "hypothesis", "jsonschema", "mcp", "prometheus_client",
                         "selenium", "tiktoken", "bpe-openai"}
    assert named == installed
