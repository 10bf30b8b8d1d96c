# The older layout (upstream's grid_world_env): the env in /app/envs/<env>, imported as
# envs.<env>.server.app from /app with PYTHONPATH=/app; its app uses relative imports.
ARG VENV_IMAGE
FROM ${VENV_IMAGE}
WORKDIR /app
COPY envs/ /app/envs/
ENV PATH="/app/.venv/bin:$PATH"
ENV PYTHONPATH="${PYTHONPATH}:/app"
ENV ENABLE_WEB_INTERFACE=false
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://localhost:8000/health', timeout=3).read()" || exit 1
CMD ["uvicorn", "envs.grid_env.server.app:app", "--host", "0.0.0.0", "--port", "8000"]
