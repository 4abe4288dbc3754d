#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for tests/test_review_browser.py when it is missing.
# Prints the browser's path. Does nothing when a chromium binary is already present.
# Without root or apt (a developer's laptop), says so and exits 0: the browser test then skips.
set -euo pipefail
for candidate in "${ADVISOR_CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    echo "$candidate"
    exit 0
  fi
done
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium not installed and cannot apt-get it here: the browser test will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo /usr/bin/chromium
