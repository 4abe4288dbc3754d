#!/usr/bin/env bash
# A newcomer's first hour, replayed from a fresh clone: the README's first command, then what the
# README and the tour point to (help, listings, the five examples, an estimate, the config, shell
# completion, the service answering a curl, the docs site built). Prints each step's command, its
# wall time and exit code; output of the steps goes to OUT/steps.log.
#   bash benchmarks/newcomer_replay.sh REPO_URL OUT
set -uo pipefail
REPO_URL=${1:?usage: newcomer_replay.sh REPO_URL OUT}
OUT=${2:?usage: newcomer_replay.sh REPO_URL OUT}
mkdir -p "$OUT"
WORK=$(mktemp -d)
LOG="$OUT/steps.log"
: >"$LOG"
export COLUMNS=100 XDG_CONFIG_HOME="$WORK/config" XDG_CACHE_HOME="$WORK/cache"
step() {
  local start end rc
  start=$(date +%s.%N)
  echo "\$ $*" >>"$LOG"
  (cd "$WORK/advisor" 2>/dev/null || cd "$WORK"; eval "$*") >>"$LOG" 2>&1
  rc=$?
  end=$(date +%s.%N)
  printf '%7.1f s  exit %-3s %s\n' "$(echo "$end - $start" | bc)" "$rc" "$*"
}
echo "# $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
step git clone -q "$REPO_URL" "$WORK/advisor"
step 'python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/advisor recommend --workload large_scale_training --memory-gb 80 --interconnect-gb-s 900'
step .venv/bin/advisor --help
step .venv/bin/advisor catalog workloads
step .venv/bin/advisor catalog models
step .venv/bin/advisor catalog regions --provider gcp
step .venv/bin/advisor recommend --workload fine_tuning --memory-gb 80 --limit 2
step .venv/bin/advisor recommend --workload low_latency_inference --model llama-3.1-8b --request-rate 100 --input-tokens 467 --output-tokens 256 --limit 1
step .venv/bin/advisor recommend --workload large_scale_training --model llama-3.1-70b --tokens 1e12 --deadline-days 30 --limit 1
step .venv/bin/advisor catalog gpus h200
step .venv/bin/advisor estimate --workload fine_tuning --model llama-3-8b --tokens 2e9 --instance-type p5.48xlarge
step .venv/bin/advisor recommend --workload fine_tunning
step .venv/bin/advisor config show
step .venv/bin/advisor --show-completion bash
step 'printf "[recommend]\nlimit = 1\n" > "$XDG_CONFIG_HOME/advisor.toml"; mkdir -p "$XDG_CONFIG_HOME/advisor"; mv "$XDG_CONFIG_HOME/advisor.toml" "$XDG_CONFIG_HOME/advisor/config.toml"; .venv/bin/advisor config show'
step 'ADVISOR_DATABASE_URL=sqlite:///$PWD/a.db .venv/bin/advisor serve --port 0 2>serve.err & pid=$!; for i in $(seq 150); do port=$(grep -o "listening on http://127.0.0.1:[0-9]*" serve.err | grep -o "[0-9]*$"); [ -n "$port" ] && break; sleep 0.2; done; curl -s -X POST "http://127.0.0.1:$port/v1/recommendations" -H "Content-Type: application/json" -d "{\"workload\": \"fine_tuning\", \"memory_gb\": 80, \"limit\": 1}" | head -c 300; echo; kill "$pid"; wait "$pid"; true' 
step '.venv/bin/pip install -q mkdocs==1.6.1 mkdocs-material==9.8.2 && NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir site'
rm -rf "$WORK"
