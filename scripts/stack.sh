#!/usr/bin/env bash
# The App's deployed topology on this machine, without Docker (compose.yaml's): a throwaway
# PostgreSQL (scripts/postgres.sh; or ALIGNBOT_DATABASE_URL if set), one `alignbot serve
# --no-worker` and N `alignbot worker` processes on loopback, until Ctrl-C.
#
#   ALIGNBOT_APP_ID=… ALIGNBOT_PRIVATE_KEY_FILE=… ALIGNBOT_WEBHOOK_SECRETS=… \
#     scripts/stack.sh --workers 3 --port 8080
#
# Arguments go to `python -m alignbot.bot.stack` (--workers N, --port P, --logs FOLDER); PYTHON picks
# the interpreter (default: .venv/bin/python).
set -u
cd "$(dirname "$0")/.."
if [ -z "${ALIGNBOT_DATABASE_URL:-}" ]; then
  # shellcheck source=scripts/postgres.sh
  source scripts/postgres.sh  # stops the server when this script exits
  if [ -z "${ALIGNBOT_TEST_POSTGRES_URL:-}" ]; then
    echo "stack.sh: no PostgreSQL to start; set ALIGNBOT_DATABASE_URL" >&2
    exit 2
  fi
  export ALIGNBOT_DATABASE_URL="$ALIGNBOT_TEST_POSTGRES_URL"
fi
"${PYTHON:-.venv/bin/python}" -m alignbot.bot.stack "$@"
