# The final stage of upstream's env Dockerfiles: the env in /app/env, the venv on PATH.
ARG VENV_IMAGE
FROM ${VENV_IMAGE}
ARG ENV_DIR
WORKDIR /app
COPY ${ENV_DIR} /app/env
ENV PATH="/app/.venv/bin:$PATH"
ENV PYTHONPATH="/app/env:$PYTHONPATH"
ENV ENABLE_WEB_INTERFACE=false
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://localhost:8000/health')" || exit 1
CMD ["sh", "-c", "cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port 8000"]
