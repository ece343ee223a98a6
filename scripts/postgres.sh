# Source this file: it starts a throwaway PostgreSQL on 127.0.0.1 for the tests (installing
# Debian's package when the server is missing), exports ALIGNBOT_TEST_POSTGRES_URL and stops
# the server when the calling shell exits.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pg_bin" ] && [ "$(id -u)" = 0 ]; then
  echo "installing PostgreSQL (Debian package) for the tests" >&2
  apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq postgresql >/dev/null
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
fi
if [ -z "$pg_bin" ]; then
  echo "PostgreSQL is not available: its tests will be skipped" >&2
  return 0 2>/dev/null || exit 0
fi
pg_data=$(mktemp -d /tmp/alignbot-pg.XXXXXX)
pg_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pg_as() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$pg_data"
pg_as "$pg_bin/initdb -D $pg_data -A trust -U postgres" >/dev/null
pg_as "$pg_bin/pg_ctl -D $pg_data -l $pg_data/server.log -w -o \"-p $pg_port -k $pg_data -c listen_addresses=127.0.0.1 -c fsync=off\" start" >/dev/null
psql -h 127.0.0.1 -p "$pg_port" -U postgres -q -c "CREATE DATABASE alignbot_test" >/dev/null
export ALIGNBOT_TEST_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$pg_port/alignbot_test"
trap 'pg_as "$pg_bin/pg_ctl -D $pg_data -m fast stop" >/dev/null 2>&1; rm -rf "$pg_data"' EXIT
echo "PostgreSQL for the tests: $ALIGNBOT_TEST_POSTGRES_URL" >&2
