# /app/.venv holding openenv and uvicorn, as upstream's multi-stage builds leave it (uv's
# environments have no pip: it is removed here too). Packages come from a host wheelhouse.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
COPY wheels /wheels
RUN python3 -m venv /app/.venv \
    && /app/.venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-index \
        --find-links /wheels 'openenv>=0.10,<0.11' uvicorn \
    && /app/.venv/bin/pip uninstall --yes --quiet pip \
    && rm -rf /wheels
