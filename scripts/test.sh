#!/usr/bin/env bash
# Sets up .venv (pinned test set-up, torch 2.13.0 CPU from local disk) and runs the whole suite:
# ruff, mypy, complexity (radon), hadolint, a base install without the probe extra, the docs (the
# site built strictly, the generated references current, every example's output as the page shows
# it), pytest in parallel
# (pytest-xdist: ADVISOR_TEST_WORKERS workers, 4 by default; each with its own PostgreSQL schema,
# ports, catalog cache and config directory). Extra arguments go to pytest. Each step says when it
# starts, that it is still running (every 15 s), and how long it took.
#
# Leaves running: the test PostgreSQL (scripts/start-postgres.sh: port ${ADVISOR_TEST_PG_PORT:-
# 54329}, data ${ADVISOR_TEST_PG_DATA:-/tmp/advisor-test-pg}), reused by the next run; stop it
# with `bash scripts/stop-postgres.sh`. Nothing is left running when ADVISOR_TEST_POSTGRES_URL
# names a server of yours.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/progress.sh
source scripts/progress.sh
started_pg=""
started_slurm=""
leave_note() {
  steps_summary
  if [ -n "$started_slurm" ]; then
    bash scripts/stop-slurm.sh
  fi
  if [ -n "$started_pg" ]; then
    echo "note: left running: the test PostgreSQL at $started_pg (data ${ADVISOR_TEST_PG_DATA:-/tmp/advisor-test-pg}),"
    echo "      reused by the next run; stop it with: bash scripts/stop-postgres.sh"
  fi
}
trap leave_note EXIT
if [ ! -x .venv/bin/python ]; then
  with_progress "venv" python3 -m venv .venv
fi
install() {
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt -e . \
    2> >(grep -v "^WARNING: Location" >&2)
}
with_progress "pip install" install  # minutes on a fresh machine (torch), seconds after
with_progress "ruff" .venv/bin/ruff check advisor probes tests benchmarks
with_progress "ruff format" .venv/bin/ruff format --check advisor probes tests benchmarks
with_progress "mypy" .venv/bin/mypy
# no function above radon grade C in advisor/ and probes/ (the exempt ones: scripts/complexity.py)
with_progress "complexity" .venv/bin/python scripts/complexity.py
# PostgreSQL for the store tests (installed from apt when missing); SQLite needs nothing.
if [ -z "${ADVISOR_TEST_POSTGRES_URL:-}" ]; then
  start_pg() { ADVISOR_TEST_POSTGRES_URL=$(bash scripts/start-postgres.sh); }
  with_progress "postgresql" start_pg
  export ADVISOR_TEST_POSTGRES_URL
  started_pg=$ADVISOR_TEST_POSTGRES_URL
fi
with_progress "hadolint" .venv/bin/hadolint Dockerfile
# A one-host Slurm cluster of two nodes for tests/test_slurm.py (slurm-wlm from apt when missing;
# stopped when the run ends). Where it cannot start, the Slurm test fails under CI=true.
if [ -z "${ADVISOR_TEST_SLURM_CONF:-}" ]; then
  start_slurm() { ADVISOR_TEST_SLURM_CONF=$(bash scripts/start-slurm.sh); }
  with_progress "slurm" start_slurm
  export ADVISOR_TEST_SLURM_CONF
  [ -n "$ADVISOR_TEST_SLURM_CONF" ] && started_slurm=yes
fi
# Headless Chromium for the review's browser test (Debian's package; no-op when present).
chromium() { bash scripts/install-chromium.sh >/dev/null; }
with_progress "chromium" chromium
with_progress "docs site" env NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet \
  --site-dir "$(mktemp -d)"
with_progress "docs reference" .venv/bin/python scripts/docs_reference.py --check
with_progress "docs examples" .venv/bin/python scripts/docs_examples.py
# A base install (no probe extra: no torch, no nvidia-ml-py) in .venv-base: the commands that
# need the extra exit 3 with the install hint, the advice works (tests/test_base_install.py).
base_install() {
  [ -x .venv-base/bin/python ] || python3 -m venv .venv-base
  .venv-base/bin/python -m pip install -q --disable-pip-version-check -e . pytest \
    2> >(grep -v "^WARNING: Location" >&2)
  ADVISOR_BASE_INSTALL=1 .venv-base/bin/python -m pytest -q -p no:cacheprovider tests/test_base_install.py
}
with_progress "base install" base_install
# The tree's bytecode written once: the tests start the CLI in hundreds of subprocesses, and
# where PYTHONDONTWRITEBYTECODE is set each of them would compile every module it imports again.
with_progress "bytecode" .venv/bin/python -m compileall -q advisor probes tests benchmarks
# --dist loadfile: a file's tests on one worker, so its module-scoped servers start once
with_progress "pytest" .venv/bin/python -m pytest -n "${ADVISOR_TEST_WORKERS:-4}" --dist loadfile "$@"
