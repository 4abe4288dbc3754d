#!/usr/bin/env bash
# Sets up .venv (pinned test set-up, torch 2.13.0 CPU from local disk) and runs the whole suite:
# ruff, mypy, pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt -e . \
  2> >(grep -v "^WARNING: Location" >&2)
echo "== ruff"; .venv/bin/ruff check advisor probes tests benchmarks
echo "== ruff format"; .venv/bin/ruff format --check advisor probes tests benchmarks
echo "== mypy"; .venv/bin/mypy
# PostgreSQL for the store tests (installed from apt when missing); SQLite needs nothing.
if [ -z "${ADVISOR_TEST_POSTGRES_URL:-}" ]; then
  ADVISOR_TEST_POSTGRES_URL=$(bash scripts/start-postgres.sh)
  export ADVISOR_TEST_POSTGRES_URL
fi
echo "== hadolint"; .venv/bin/hadolint Dockerfile
# Headless Chromium for the review's browser test (Debian's package; no-op when present).
bash scripts/install-chromium.sh >/dev/null
echo "== pytest"; .venv/bin/python -m pytest "$@"
