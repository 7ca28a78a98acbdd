# aml_retriever: standard library only, so the image is Python and the source.
FROM python:3.11-slim
# The server's user comes first, so nothing copied below belongs to it: the code stays read-only
# to the process that serves it; only /data is the user's.
RUN useradd --create-home --uid 10001 aml \
    && mkdir -p /data && chown aml:aml /data
WORKDIR /app
COPY . .
RUN python3 -m aml_retriever check
ENV AML_HOST=0.0.0.0 \
    AML_PORT=8080 \
    AML_DB_PATH=/data/aml.db \
    PYTHONUNBUFFERED=1
USER aml
# The store. A named volume (-v aml-data:/data) starts owned by aml; a bind mount
# (-v /srv/aml:/data) must be writable by uid 10001 (chown 10001 /srv/aml), or serve exits 1
# naming the permission problem.
VOLUME ["/data"]
EXPOSE 8080
# Probes the port the server was started with (--port, AML_PORT or --config), read from the
# server's own command line and environment.
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s \
    CMD ["python3", "/app/scripts/docker-healthcheck.py"]
STOPSIGNAL SIGTERM
# A key is required to bind 0.0.0.0: pass -e AML_API_KEY=... (or AML_ALLOW_UNAUTHENTICATED=true).
# `docker run IMAGE serve --port 9000`, `docker run -i IMAGE mcp --project-root /data`,
# `docker run IMAGE stats`, `docker run IMAGE ./scripts/run_tests.sh`
ENTRYPOINT ["./scripts/docker-entrypoint.sh"]
CMD ["serve"]
