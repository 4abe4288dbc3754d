#!/usr/bin/env bash
# Progress for the long steps of scripts/test.sh, sourced by it: a step says when it starts,
# says it is still running every ADVISOR_PROGRESS_EVERY seconds (default 15; a silent pip
# install looked hung for minutes), and how long it took; `steps_summary` lists them all.

STEP_TIMES=()

# with_progress NAME CMD ARGS...: run CMD, printing NAME, a heartbeat, and the time it took.
with_progress() {
  local name=$1 every=${ADVISOR_PROGRESS_EVERY:-15} started=$SECONDS rc=0 beat
  shift
  echo "== $name"
  (
    while sleep "$every"; do
      echo "   ... $name: still running ($((SECONDS - started)) s)"
    done
  ) &
  beat=$!
  "$@" || rc=$?
  kill "$beat" 2>/dev/null
  wait "$beat" 2>/dev/null || true
  STEP_TIMES+=("$(printf '%-14s %5d s' "$name" $((SECONDS - started)))")
  echo "   $name: $((SECONDS - started)) s"
  return "$rc"
}

steps_summary() {
  echo "== time per step"
  local line
  for line in "${STEP_TIMES[@]}"; do
    echo "   $line"
  done
}
