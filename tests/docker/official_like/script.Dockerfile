# An env started as a script (`python -m server.app`, whose main() runs uvicorn) and no
# openenv.yaml: nothing says which app it serves, so openenv-gym runs it natively.
ARG VENV_IMAGE
FROM ${VENV_IMAGE}
COPY echo_env /app/env
RUN rm /app/env/openenv.yaml
WORKDIR /app/env
ENV PATH="/app/.venv/bin:$PATH" PYTHONPATH="/app/env" ENABLE_WEB_INTERFACE=false
CMD ["python", "-m", "server.app"]
