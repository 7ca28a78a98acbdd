# aml_retriever: standard library only, so the image is Python and the source.
FROM python:3.11-slim
WORKDIR /app
COPY . .
RUN useradd --create-home --uid 10001 aml \
    && mkdir -p /data && chown aml:aml /data \
    && python3 -m aml_retriever check
ENV AML_HOST=0.0.0.0 \
    AML_PORT=8080 \
    AML_DB_PATH=/data/aml.db \
    PYTHONUNBUFFERED=1
USER aml
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s \
    CMD python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health', timeout=2)"
STOPSIGNAL SIGTERM
# A key is required to bind 0.0.0.0: pass -e AML_API_KEY=... (or AML_ALLOW_UNAUTHENTICATED=true).
# `docker run IMAGE serve --port 9000`, `docker run IMAGE stats`, `docker run IMAGE ./scripts/run_tests.sh`
ENTRYPOINT ["./scripts/docker-entrypoint.sh"]
CMD ["serve"]
