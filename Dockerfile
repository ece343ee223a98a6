# alignbot's GitHub App: `alignbot serve` (webhooks, worker) in one container, or with
# compose.yaml one web container (`alignbot serve --no-worker`) and N workers (`alignbot
# worker`) on PostgreSQL.
#
#   docker build -t alignbot .
#   docker run -p 8080:8080 --cap-add SYS_ADMIN --security-opt seccomp=unconfined \
#     -v "$PWD/app.pem:/run/secrets/app.pem:ro" -e ALIGNBOT_PRIVATE_KEY_FILE=/run/secrets/app.pem \
#     -e ALIGNBOT_APP_ID=… -e ALIGNBOT_WEBHOOK_SECRETS=… -v alignbot-data:/data alignbot
#
# app.pem is the App's private key as GitHub gave it, mounted read-only; the service refuses
# to start, in one line, if it cannot sign with it or GitHub does not take it
# (docs/operations.md, "Settings" and "Starting").
#
# The service runs as root so that the sandbox can give each pull request's code its own uid
# and fresh namespaces made by bubblewrap (network, mount, pid, IPC: a file system of the
# system folders and the work folder alone); without SYS_ADMIN it still drops to another uid
# with Landlock, seccomp and resource limits, and the check run says which isolation applied.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends util-linux ca-certificates bubblewrap \
 && rm -rf /var/lib/apt/lists/*

# The reference: PyTorch's CPU build, pinned (a bare `torch` would pull a CUDA build).
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
# alignbot itself, installed as a wheel with the App's extra (templates included), from sources
# that are removed afterwards: nothing runs from a source tree.
COPY pyproject.toml README.md /src/
COPY checks /src/checks
COPY bot /src/bot
COPY templates /src/templates
COPY examples /src/examples
RUN pip install --no-cache-dir '/src[app]' \
 && rm -rf /src \
 && cd / && python -c "import alignbot.bot.serve, alignbot.checks.report as r; \
r.environment().get_template('pr_comment.md.j2'); r.environment().get_template('repro.py.j2')"

WORKDIR /app
ENV ALIGNBOT_HOST=0.0.0.0 \
    ALIGNBOT_PORT=8080 \
    ALIGNBOT_DATABASE_URL=sqlite:////data/alignbot.db \
    ALIGNBOT_LOG_FORMAT=json \
    PYTHONUNBUFFERED=1
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz')"
CMD ["alignbot", "serve"]
