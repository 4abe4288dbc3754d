#!/usr/bin/env bash
# Stops the PostgreSQL that scripts/start-postgres.sh (and so scripts/test.sh) started and left
# running for later runs. Same ADVISOR_TEST_PG_DATA as the start; a stopped one is no error.
set -euo pipefail
DATA=${ADVISOR_TEST_PG_DATA:-/tmp/advisor-test-pg}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/pg_ctl" ]; then
  echo "PostgreSQL is not installed: nothing to stop"
  exit 0
fi
run_as=()
[ "$(id -u)" = 0 ] && run_as=(runuser -u postgres --)
if ! "${run_as[@]}" "$bindir/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  echo "no PostgreSQL running on $DATA: nothing to stop"
  exit 0
fi
"${run_as[@]}" "$bindir/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
echo "stopped the test PostgreSQL on $DATA (its data stays there; start-postgres.sh starts anew)"
