# aml_retriever: standard library only, so the image is just Python and the source.
FROM python:3.11-slim
WORKDIR /app
COPY aml_retriever ./aml_retriever
COPY scripts ./scripts
ENV AML_HOST=0.0.0.0 \
    AML_PORT=8080 \
    AML_DB_PATH=/data/aml.db \
    PYTHONUNBUFFERED=1
VOLUME ["/data"]
EXPOSE 8080
RUN python3 -m aml_retriever check
# A key is required to bind 0.0.0.0: pass -e AML_API_KEY=... (or AML_ALLOW_UNAUTHENTICATED=true).
STOPSIGNAL SIGTERM
CMD ["python3", "-m", "aml_retriever", "serve"]
