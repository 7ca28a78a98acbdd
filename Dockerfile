# aml_retriever: standard library only, so the image is Python and the source.
# BASE is any image with python3 >= 3.11 (SQLite with FTS5) and useradd, e.g. a Debian bookworm
# root file system with python3 (scripts/check_docker.sh builds one with mmdebstrap).
ARG BASE=python:3.11-slim
FROM ${BASE}
# The server's user comes first, so nothing copied below belongs to it: the code stays read-only
# to the process that serves it; only /data is the user's.
RUN useradd --create-home --uid 10001 aml \
    && mkdir -p /data && chown aml:aml /data
WORKDIR /app
COPY . .
RUN python3 -m aml_retriever check
# Everything the image keeps is under /data: the HTTP store (AML_DB_PATH) and, for `mcp`, the
# account's global memory, whose default root is $XDG_DATA_HOME/aml_retriever (here
# /data/aml_retriever/memory.db) rather than the home directory of a throwaway container.
ENV AML_HOST=0.0.0.0 \
    AML_PORT=8080 \
    AML_DB_PATH=/data/aml.db \
    XDG_DATA_HOME=/data \
    PYTHONUNBUFFERED=1
USER aml
# The store. A named volume (-v aml-data:/data) starts owned by aml; a bind mount
# (-v /srv/aml:/data) must be writable by uid 10001 (chown 10001 /srv/aml), or serve exits 1
# naming the permission problem.
VOLUME ["/data"]
EXPOSE 8080
# Probes the port the server was started with (--port, AML_PORT or --config), read from the
# server's own command line and environment. The timeout leaves room for a busy host: the check
# answers in about 0.1 s, but 3 s were exceeded while the host's 2 cores ran a test suite.
HEALTHCHECK --interval=30s --timeout=10s --start-period=5s \
    CMD ["python3", "/app/scripts/docker-healthcheck.py"]
STOPSIGNAL SIGTERM
# A key is required to bind 0.0.0.0: pass -e AML_API_KEY=... (or AML_ALLOW_UNAUTHENTICATED=true).
# `docker run IMAGE serve --port 9000`, `docker run -i --rm IMAGE mcp --project-root /data`,
# `docker run IMAGE stats`, `docker run IMAGE env -u AML_HOST -u AML_PORT -u AML_DB_PATH
# ./scripts/run_tests.sh` (the tests expect the default settings). scripts/check_docker.sh builds
# and runs this image for real (podman, runc) and checks it.
ENTRYPOINT ["./scripts/docker-entrypoint.sh"]
CMD ["serve"]
