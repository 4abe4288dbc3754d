#!/usr/bin/env bash
# Starts a throw-away PostgreSQL for the test suite (installing it from apt if needed) and prints
# the URL to export as ADVISOR_TEST_POSTGRES_URL. Idempotent: reuses a running instance.
set -euo pipefail
PORT=${ADVISOR_TEST_PG_PORT:-54329}
DATA=${ADVISOR_TEST_PG_DATA:-/tmp/advisor-test-pg}
URL="postgresql://advisor:advisor@127.0.0.1:${PORT}/advisor_test"

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "installing PostgreSQL from apt" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
run_as=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home /var/lib/postgresql postgres
  run_as=(runuser -u postgres --)
fi
if "${run_as[@]}" "$bindir/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  echo "$URL"
  exit 0
fi
rm -rf "$DATA"
mkdir -p "$DATA"
[ "$(id -u)" = 0 ] && chown postgres "$DATA"
"${run_as[@]}" "$bindir/initdb" -D "$DATA" -U postgres --auth=trust >/dev/null
"${run_as[@]}" "$bindir/pg_ctl" -D "$DATA" -l "$DATA/log" -w \
  -o "-p $PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=on" start >/dev/null
"${run_as[@]}" "$bindir/psql" -h 127.0.0.1 -p "$PORT" -U postgres -q \
  -c "CREATE ROLE advisor LOGIN PASSWORD 'advisor'" \
  -c "CREATE DATABASE advisor_test OWNER advisor" >/dev/null
echo "$URL"
