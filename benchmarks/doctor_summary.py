"""The table of a doctor run on a GPU machine (benchmarks/doctor_gpu.sh's output folder): each
pitfall program's verdict, findings and speed, the fixes' speed-ups, and the doctor's overhead on
the healthy loop (median of the alternating rounds). Usage:
    python benchmarks/doctor_summary.py benchmarks/results/doctor-DATE-DEVICE [> FOLDER/summary.txt]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

PROGRAMS = ["model_on_cpu", "pageable_sync", "pinned_prefetch", "made_on_host", "made_on_device",
            "small_model"]  # fmt: skip
EXPECTED = {
    "model_on_cpu": {"never_used_gpu"},
    "pageable_sync": {"transfer_bound", "sync_bound"},
    "pinned_prefetch": set(),
    "made_on_host": {"made_on_host"},
    "made_on_device": set(),
    "small_model": {"under_used"},
}
FIXES = [("pinned_prefetch", "pageable_sync"), ("made_on_device", "made_on_host")]


def _rate(stderr: Path) -> float | None:
    for line in stderr.read_text().splitlines():
        if line.startswith("RESULT "):
            return float(json.loads(line[7:])["steps_per_s"])
    return None


def main(folder: Path) -> int:
    print((folder / "env.txt").read_text().strip())
    print(f"\n{'program':<16} {'verdict':<9} {'exit':>4} {'steps/s':>8} {'SM all*':>7} "
          f"{'syncs':>6} {'hook s':>7}  findings (expected)")  # fmt: skip
    rates: dict[str, float | None] = {}
    wrong = 0
    for p in PROGRAMS:
        report = json.loads((folder / f"{p}.json").read_text())
        job = report["job"]
        rates[p] = _rate(folder / f"{p}.stderr")
        codes = {f["code"] for f in job["findings"]}
        ok = EXPECTED[p] <= codes and (EXPECTED[p] or not codes)
        wrong += not ok
        sm = [g["sm_active_pct"] for s in job["samples"] for g in s["gpus"]
              if g["job_on_gpu"] and g["sm_active_pct"] is not None]  # fmt: skip
        torch = job["torch"] or {}
        print(
            f"{p:<16} {job['verdict']:<9} {job['exit_code']:>4} {rates[p] or 0:>8.2f} "
            f"{(statistics.mean(sm) if sm else 0):>6.0f}% {torch.get('syncs', 0):>6} "
            f"{torch.get('hook_s', 0):>7.3f}  {', '.join(sorted(codes)) or '-'} "
            f"({', '.join(sorted(EXPECTED[p])) or 'healthy'}){'' if ok else '  <-- WRONG'}"
        )
    print("* GPM SM activity over every reading with the job on the GPU, start-up included (the "
          "diagnosis judges from the job's first kernel on)\n")  # fmt: skip
    for fix, pitfall in FIXES:
        a, b = rates[fix], rates[pitfall]
        if a and b:
            print(f"{fix} over {pitfall}: {a / b:.2f}x the steps per second")
    runs: dict[str, list[float]] = {}
    for line in (folder / "overhead.txt").read_text().splitlines():
        label, _, body = line.split(" ", 2)
        runs.setdefault(label, []).append(float(json.loads(body)["steps_per_s"]))
    plain = statistics.median(runs.get("plain", [0.0])) or 1.0
    print("\nhealthy loop (pinned_prefetch.py), steps/s, median of the rounds:")
    for label, values in runs.items():
        m = statistics.median(values)
        print(f"  {label:<13} {m:8.3f}  ({', '.join(f'{v:.3f}' for v in values)})  "
              f"{(1 - m / plain) * 100:+.1f}% slower than plain")  # fmt: skip
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
