#!/bin/bash
# The server's CPU for each anonymous read (wrk, 8 connections, 4 s each), one tree after another:
#   bash benchmarks/anonymous_reads.sh TREE [TREE ...]
# Each tree's `advisor serve` (SQLite in a fresh directory, default settings) is started from that
# tree with this checkout's .venv, then every path below is asked for 4 s; the server process's
# CPU ticks (/proc/PID/stat utime + stime, 10 ms each) over the requests wrk counted.
set -euo pipefail
PY=$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python
PATHS=(/healthz /readyz /metrics "/v1/accelerators?vendor=nvidia" /v1/instance-types
       "/v1/instance-types?provider=aws" "/v1/instance-types?region=us-east-1")
port=18900
for tree in "$@"; do
  port=$((port + 1))
  dir=$(mktemp -d)
  (cd "$tree" && ADVISOR_DATABASE_URL="sqlite:///$dir/a.db" PYTHONPATH="$tree" \
    exec "$PY" -m advisor serve --port "$port" --no-access-log >"$dir/log.txt" 2>&1) &
  pid=$!
  until curl -sf "http://127.0.0.1:$port/healthz" >/dev/null; do sleep 0.2; done
  echo "== $tree ($(git -C "$tree" rev-parse --short HEAD 2>/dev/null || echo archive)), $(date -u +%H:%M:%S) UTC"
  for path in "${PATHS[@]}"; do
    curl -s -o /dev/null "http://127.0.0.1:$port$path"  # the first builds what is kept
    c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    out=$(wrk -t1 -c8 -d4s "http://127.0.0.1:$port$path")
    c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    n=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    bad=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
    printf "%-40s %9s req/s  server CPU %.3f ms a request  non-2xx %s\n" "$path" "$rps" \
      "$(echo "($c1 - $c0) * 10 / $n" | bc -l)" "${bad:-0}"
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
done
