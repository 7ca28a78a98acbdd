#!/usr/bin/env bash
# Build the image from this checkout's Dockerfile and run it for real with podman (runtime runc),
# checking what README "Docker" says: one line per check, "ok   ..." or "FAIL ...".
# Exit 0 when every check passes, 1 when one fails, 77 when this machine cannot build or run a
# container at all (the reason on the "SKIP" line; tests/test_docker.py turns it into a skip).
#
# The base image: --base IMAGE (one already in podman's store, e.g. python:3.11-slim pulled from a
# registry), else localhost/aml-debian-python3:bookworm, a Debian bookworm root file system with
# python3 built with mmdebstrap (as root, from Debian's packages; about a minute) and imported into
# podman's store once: later runs reuse it. --rebuild-base builds it again.
# --keep leaves the image, the containers and the volume in place for a look.
#
# Needs: podman and runc (apt-get install podman runc), mmdebstrap for the first base build.
set -euo pipefail
cd "$(dirname "$0")/.."

DEFAULT_BASE=localhost/aml-debian-python3:bookworm
BASE=$DEFAULT_BASE
REBUILD_BASE=0
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --base) BASE="$2"; shift 2 ;;
    --rebuild-base) REBUILD_BASE=1; shift ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--base IMAGE] [--rebuild-base] [--keep]" >&2; exit 2 ;;
  esac
done

# crun refuses some hosts' hybrid cgroups; runc runs there. Podman's default limits (1048576 open
# files) can exceed the host's hard limits, and runc then refuses to start the container: these fit.
RUN_OPTS=(--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
TAG="localhost/aml_retriever:check-$$"
NAME="aml-check-$$"
VOLUME="aml-check-$$"
KEY="check-key-$$"
WORK="$(mktemp -d "${TMPDIR:-/var/tmp}/aml-check-docker.XXXXXX")"
failures=0

ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
skip() { echo "SKIP $*"; exit 77; }
now() { date +%s.%N; }
since() { python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.1f}")' "$1" "$(now)"; }
# Podman without systemd logs that it cannot schedule the periodic health check (docker runs it
# itself; here `podman healthcheck run` does): that noise goes to the log, not the report.
pm() { podman "$@" 2>>"$WORK/podman.log"; }

cleanup() {
  if [ "$KEEP" = 1 ]; then
    echo "kept: image $TAG, containers $NAME $NAME-2 $NAME-3, volume $VOLUME, logs in $WORK"
    return
  fi
  podman rm -f -t 0 "$NAME" "$NAME-2" "$NAME-3" >/dev/null 2>&1 || true
  podman volume rm -f "$VOLUME" >/dev/null 2>&1 || true
  podman rmi -f "$TAG" >/dev/null 2>&1 || true
  if [ "$failures" -gt 0 ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# ---- the runtime and the base ---------------------------------------------------------------
command -v podman >/dev/null 2>&1 || skip "runtime: podman is not installed (apt-get install podman runc)"
RUNC=$(PATH="$PATH:/usr/sbin:/sbin" command -v runc) || skip "runtime: runc is not installed (apt-get install runc)"

if [ "$REBUILD_BASE" = 1 ] && [ "$BASE" = "$DEFAULT_BASE" ]; then
  podman rmi -f "$BASE" >/dev/null 2>&1 || true
fi
if podman image exists "$BASE"; then
  base_origin="reused from podman's store"
else
  [ "$BASE" = "$DEFAULT_BASE" ] || skip "base: $BASE is not in podman's store (podman pull it first)"
  [ "$(id -u)" = 0 ] || skip "base: $BASE is not in podman's store and building it takes root (mmdebstrap)"
  command -v mmdebstrap >/dev/null 2>&1 \
    || skip "base: $BASE is not in podman's store and mmdebstrap is not installed (apt-get install mmdebstrap)"
  # One build at a time on this machine; a run that waited here finds the image built.
  exec 9>/var/tmp/aml-check-docker-base.lock
  flock 9
  started=$(now)
  if podman image exists "$BASE"; then
    base_origin="built by a concurrent run"
  else
    mmdebstrap --quiet --variant=apt --include=python3 bookworm "$WORK/rootfs.tar" >"$WORK/mmdebstrap.log" 2>&1 \
      || { tail -5 "$WORK/mmdebstrap.log"; skip "base: mmdebstrap could not build a bookworm root file system (log above)"; }
    pm import --quiet "$WORK/rootfs.tar" "$BASE" >/dev/null \
      || skip "base: podman import of the root file system failed: $(tail -1 "$WORK/podman.log")"
    rm -f "$WORK/rootfs.tar"
    base_origin="built with mmdebstrap and imported in $(since "$started")s"
  fi
  flock -u 9
fi
probe=$(pm run --rm "${RUN_OPTS[@]}" "$BASE" python3 -c '
import platform, sqlite3
c = sqlite3.connect(":memory:"); c.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
print(f"python3 {platform.python_version()}, SQLite {sqlite3.sqlite_version} with FTS5")') \
  || skip "runtime: podman cannot run a container of $BASE here: $(grep -v systemd "$WORK/podman.log" | tail -1)"
ok "base: $BASE, $base_origin ($probe; runtime $("$RUNC" --version | head -1), $(podman --version))"

# ---- the image ------------------------------------------------------------------------------
started=$(now)
if pm build --quiet --format docker --pull=never "${RUN_OPTS[@]}" --build-arg "BASE=$BASE" -t "$TAG" . \
    >"$WORK/build.log"; then
  size=$(podman image inspect "$TAG" --format '{{.Size}}' | python3 -c 'print(f"{int(input()) / 1e6:.0f} MB")')
  ok "build: the Dockerfile on BASE=$BASE in $(since "$started")s ($size)"
else
  fail "build: the Dockerfile on BASE=$BASE: $(tail -3 "$WORK/podman.log")"
  exit 1
fi

# A small HTTP and MCP client: each subcommand prints the outcome and exits 0 when it is right.
cat >"$WORK/client.py" <<'PY'
import json, subprocess, sys, time, urllib.error, urllib.request

def call(port, method, path, body=None, key=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")

def rpc(command, calls):
    """Run an MCP server (command), call each (tool, arguments), close stdin; the results."""
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "check_docker", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": i, "method": "tools/call",
               "params": {"name": tool, "arguments": arguments}}
              for i, (tool, arguments) in enumerate(calls, 1)]
    done = subprocess.run(command, input="".join(json.dumps(m) + "\n" for m in lines),
                          capture_output=True, text=True, timeout=120)
    answers = {m.get("id"): m for m in map(json.loads, done.stdout.splitlines())}
    results = [answers.get(i, {}).get("result", {}).get("structuredContent")
               for i in range(1, len(calls) + 1)]
    return done.returncode, results, done.stderr

what, args = sys.argv[1], sys.argv[2:]
if what == "health":  # PORT: wait up to 60 s for {"status": "ok"}
    port, started, seen = args[0], time.monotonic(), None
    while time.monotonic() - started < 60:
        try:
            status, body = call(port, "GET", "/health")
            if status == 200 and body.get("status") == "ok":
                print(f"{json.dumps(body)} after {time.monotonic() - started:.1f}s")
                sys.exit(0)
            seen = f"{status} {body}"
        except OSError as error:
            seen = error
        time.sleep(0.2)
    print(f"no answer in 60s: {seen}")
    sys.exit(1)
if what == "unauthenticated":  # PORT
    status, body = call(args[0], "POST", "/add", {"request_id": "r0", "user_id": "u", "session_id": "s",
                                                  "messages": [{"role": "user", "content": "x"}]})
    print(f"{status} {body.get('error', body) if isinstance(body, dict) else body}")
    sys.exit(status != 401)
if what == "add":  # PORT KEY
    status, body = call(args[0], "POST", "/add", {
        "request_id": "check-1", "user_id": "docker-check", "session_id": "s1",
        "messages": [{"role": "user", "content": "The launch date moved to August 14, 2026."}]}, args[1])
    print(f"{status} stored {body.get('stored')}")
    sys.exit(not (status == 200 and body.get("stored") == 1))
if what == "search":  # PORT KEY
    status, body = call(args[0], "POST", "/search",
                        {"query": "When is the launch?", "user_id": "docker-check", "top_k": 3}, args[1])
    top = (body.get("data") or [{}])[0] if status == 200 else {}
    print(f"{status}, first result {json.dumps(top.get('content'))}")
    sys.exit(top.get("content") != "The launch date moved to August 14, 2026.")
if what == "remember":  # COMMAND...: remember a local and a global statement
    code, results, stderr = rpc(args, [
        ("remember", {"content": "The user prefers pytest over unittest.", "scope": "global"}),
        ("remember", {"content": "This project is served from a container.", "scope": "local"})])
    ids = [(r or {}).get("statement", {}).get("id") for r in results]
    print(f"exit {code}, remembered {', '.join(map(str, ids))}")
    if not (code == 0 and ids == ["global:1", "local:1"]):
        sys.exit(stderr[-2000:])
    sys.exit(0)
if what == "recall":  # COMMAND...: both statements, found by a new server
    code, results, stderr = rpc(args, [("recall", {"query": "Which test framework does the user prefer?"}),
                                       ("recall", {"query": "Where is this project served from?"})])
    found = [((r or {}).get("results") or [{}])[0].get("id") for r in results]
    print(f"exit {code}, recalled {', '.join(map(str, found))}")
    if not (code == 0 and found == ["global:1", "local:1"]):
        sys.exit(stderr[-2000:])
    sys.exit(0)
sys.exit(f"unknown check {what}")
PY
client() { python3 "$WORK/client.py" "$@"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
serve() {  # NAME PORT CONTAINER_PORT [COMMAND...]: serve on the volume, CONTAINER_PORT published on PORT
  local name=$1 port=$2 inside=$3
  shift 3
  pm run -d --name "$name" "${RUN_OPTS[@]}" -p "127.0.0.1:$port:$inside" -v "$VOLUME:/data" \
    -e "AML_API_KEY=$KEY" "$TAG" "$@" >/dev/null
}

# ---- serve: health, Add, Search through the published port; the user; the health check -----
PORT=$(free_port)
serve "$NAME" "$PORT" 8080 || { fail "serve: podman run: $(tail -1 "$WORK/podman.log")"; exit 1; }
if out=$(client health "$PORT"); then ok "serve: GET /health through the published port 127.0.0.1:$PORT -> $out"
else fail "serve: GET /health through 127.0.0.1:$PORT: $out; logs: $(podman logs "$NAME" 2>&1 | tail -3)"; fi
if out=$(client unauthenticated "$PORT"); then ok "auth: POST /add without the key -> $out"
else fail "auth: POST /add without the key -> $out (expected 401)"; fi
if out=$(client add "$PORT" "$KEY"); then ok "add: POST /add through the published port -> $out"
else fail "add: POST /add through the published port -> $out"; fi
if out=$(client search "$PORT" "$KEY"); then ok "search: POST /search through the published port -> $out"
else fail "search: POST /search through the published port -> $out"; fi

PID=$(podman inspect "$NAME" --format '{{.State.Pid}}' || echo 0)
uids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$PID/status" 2>/dev/null || true)
user=$(pm exec "$NAME" id -un || true)
owner=$(pm exec "$NAME" stat -c %u /data/aml.db || true)
if [ "$uids" = "10001 10001 10001 10001" ] && [ "$user" = aml ] && [ "$owner" = 10001 ]; then
  ok "user: the server (host pid $PID) runs as uid 10001 ($user), not root; /data/aml.db belongs to uid 10001"
else
  fail "user: the server's uids are '$uids' ($user), /data/aml.db belongs to uid $owner (expected 10001, aml)"
fi

if out=$(pm healthcheck run "$NAME" 2>&1); then ok "healthcheck: podman healthcheck run on the serving container -> ${out:-healthy}"
else fail "healthcheck: podman healthcheck run on the serving container -> $out: $(tail -1 "$WORK/podman.log")"; fi
# The server stops answering (frozen with SIGSTOP from the host, so the container stays up): the
# image's HEALTHCHECK fails each time and, after its retries (3), the container is unhealthy.
kill -STOP "$PID"
started=$(now)
codes=()
for _ in 1 2 3; do
  if pm healthcheck run "$NAME" >/dev/null 2>&1; then codes+=(0); else codes+=($?); fi
done
elapsed=$(since "$started")
status=$(podman inspect "$NAME" --format '{{.State.Health.Status}}' 2>/dev/null || true)
reason=$(podman inspect "$NAME" --format '{{json .State.Health.Log}}' 2>/dev/null \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)[-1]["Output"].strip())' 2>/dev/null || true)
kill -CONT "$PID"
if [ "${codes[*]}" = "1 1 1" ] && [ "$status" = unhealthy ]; then
  ok "healthcheck: server stopped (SIGSTOP) -> podman healthcheck run fails 3 times in ${elapsed}s, status $status ($reason)"
else
  fail "healthcheck: server stopped (SIGSTOP) -> exit codes ${codes[*]}, status '$status' (expected 1 1 1, unhealthy): $reason"
fi
if pm healthcheck run "$NAME" >/dev/null 2>&1 && [ "$(podman inspect "$NAME" --format '{{.State.Health.Status}}')" = healthy ]; then
  ok "healthcheck: server resumed (SIGCONT) -> healthy again"
else
  fail "healthcheck: server resumed (SIGCONT) -> $(podman inspect "$NAME" --format '{{.State.Health.Status}}'):" \
    "$(grep -v systemd "$WORK/podman.log" | tail -1)"
fi

started=$(now)
pm stop -t 20 "$NAME" >/dev/null || true
elapsed=$(since "$started")
code=$(podman inspect "$NAME" --format '{{.State.ExitCode}}' || true)
if [ "$code" = 0 ]; then ok "stop: podman stop (SIGTERM) -> the server exits 0 in ${elapsed}s"
else fail "stop: podman stop (SIGTERM) -> exit code $code after ${elapsed}s"; fi

# ---- the volume outlives the container; another port ---------------------------------------
pm rm -f "$NAME" >/dev/null || true
PORT=$(free_port)
serve "$NAME-2" "$PORT" 9000 serve --port 9000 \
  || fail "volume: podman run of a new container: $(tail -1 "$WORK/podman.log")"
if ! out=$(client health "$PORT"); then
  fail "volume: a new container (serve --port 9000) on the same volume: GET /health -> $out"
elif out=$(client search "$PORT" "$KEY"); then
  ok "volume: container removed, a new one (serve --port 9000) on the same volume -> Search $out"
else
  fail "volume: container removed, a new one (serve --port 9000) on the same volume -> Search $out"
fi
if out=$(pm healthcheck run "$NAME-2" 2>&1); then ok "healthcheck: on \`serve --port 9000\` it probes port 9000 -> ${out:-healthy}"
else fail "healthcheck: on \`serve --port 9000\` -> $out"; fi
pm stop -t 20 "$NAME-2" >/dev/null || true
if out=$(pm run --rm "${RUN_OPTS[@]}" -v "$VOLUME:/data" "$TAG" stats); then
  users=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get("users"))' "$out" 2>/dev/null || echo "?")
  ok "stats: \`stats\` through the entrypoint reads the store on the volume -> users $users"
else
  fail "stats: \`stats\` through the entrypoint -> $out"
fi

# ---- a directory of the host mounted on /data: refused until uid 10001 may write it ----------
BIND="$WORK/bind"
mkdir -m 755 "$BIND"
code=0
out=$(podman run --rm "${RUN_OPTS[@]}" -v "$BIND:/data" -e "AML_API_KEY=$KEY" "$TAG" 2>&1) || code=$?
out=$(grep -v systemd <<<"$out" | tail -1)
if [ "$code" = 1 ] && [ -n "$out" ]; then ok "bind mount: a host directory uid 10001 cannot write -> serve exits 1: $out"
else fail "bind mount: a host directory uid 10001 cannot write -> exit $code: $out (expected 1 and the reason)"; fi
chown 10001 "$BIND" 2>/dev/null || true
PORT=$(free_port)
if pm run -d --name "$NAME-3" "${RUN_OPTS[@]}" -p "127.0.0.1:$PORT:8080" -v "$BIND:/data" -e "AML_API_KEY=$KEY" \
    "$TAG" >/dev/null && out=$(client health "$PORT") && [ -f "$BIND/aml.db" ]; then
  ok "bind mount: after chown 10001 it serves -> /health $out, the store in the host directory"
else
  fail "bind mount: after chown 10001 -> ${out:-no container}"
fi
pm rm -f -t 20 "$NAME-3" >/dev/null || true

# ---- mcp: both memories on the volume, kept across containers -------------------------------
MCP=(podman run -i --rm "${RUN_OPTS[@]}" -v "$VOLUME:/data" "$TAG" mcp --project-root /data)
if out=$(client remember "${MCP[@]}" 2>>"$WORK/podman.log"); then ok "mcp: \`mcp --project-root /data\` through the entrypoint -> $out"
else fail "mcp: \`mcp --project-root /data\` through the entrypoint -> $out"; fi
files=$(pm run --rm "${RUN_OPTS[@]}" -v "$VOLUME:/data" "$TAG" \
  find /data -name memory.db -printf '%p (uid %U) ' | sed 's/ $//' || true)
if [[ "$files" == *"/data/.aml/memory.db"* && "$files" == *"/data/aml_retriever/memory.db"* ]]; then
  ok "mcp: both memories are on the volume: $files"
else
  fail "mcp: the memories on the volume are: ${files:-none} (expected /data/.aml/memory.db and /data/aml_retriever/memory.db)"
fi
if out=$(client recall "${MCP[@]}" 2>>"$WORK/podman.log"); then ok "mcp: a new container recalls both -> $out"
else fail "mcp: a new container recalls both -> $out"; fi

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
