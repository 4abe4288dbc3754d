"""Summarise a run of benchmarks/doctor_unseen_gpu.sh: each program's verdict, findings and
stage shares; the steps/s of the broken and the fixed input pipeline; the cost of
`advisor doctor --pid` on the healthy GEMM loop (its steps/s in windows wholly inside the
doctor's attachment against those wholly outside it).

    python benchmarks/doctor_unseen_summary.py FOLDER
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import sys
from pathlib import Path


def program(folder: Path, name: str) -> list[str]:
    path = folder / f"{name}.json"
    if not path.exists():
        return [f"{name}: no report"]
    job = json.loads(path.read_text())["job"]
    lines = [f"{name}: verdict {job['verdict']}"]
    for f in job["findings"]:
        lost = ""
        if f.get("lost_gpu_hours") is not None:
            lost = f" [lost {f['lost_gpu_hours']:.5f} GPU-h, ${f.get('lost_usd') or 0:.4f}]"
        lines.append(f"  {f['code']}: {f['summary']}{lost}")
    stages = job.get("stages")
    if stages:
        shares = ", ".join(f"{s['stage']} {s['share']:.0%}" for s in stages["shares"])
        lines.append(f"  stages ({stages['samples']} samples): {shares}")
        lines += [f"  note: {n}" for n in stages["notes"]]
    return lines


def results(folder: Path) -> dict[str, float]:
    out = {}
    for line in (folder / "log.txt").read_text().splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT ") :])
            out[r["program"]] = r["steps_per_s"]
    return out


def pid_cost(folder: Path) -> list[str]:
    windows, marks = [], {}
    for line in (folder / "windows.txt").read_text().splitlines():
        if line.startswith("WINDOW "):
            windows.append(json.loads(line[len("WINDOW ") :]))
        elif line.startswith("DOCTOR "):
            _, t, what = line.split()
            marks[what] = float(t)
    report = folder / "healthy_pid.json"
    if report.exists():  # the sampled window itself, not the doctor's start-up and exit
        body = json.loads(report.read_text())
        start = dt.datetime.fromisoformat(body["created_at"].replace("Z", "+00:00")).timestamp()
        marks = {"start": start, "end": start + body["job"]["sampled_s"]}
    if "start" not in marks or "end" not in marks:
        return ["--pid cost: the doctor's times are missing"]
    inside = [
        w["steps_per_s"]
        for w in windows
        if w["start"] >= marks["start"] and w["end"] <= marks["end"]
    ]
    outside = [
        w["steps_per_s"]
        for w in windows[1:]
        if w["end"] <= marks["start"] or w["start"] >= marks["end"]
    ]
    if not inside or not outside:
        return [f"--pid cost: {len(inside)} windows inside, {len(outside)} outside: too few"]
    a, b = statistics.median(outside), statistics.median(inside)
    return [
        f"--pid cost on healthy_gemm: {a:.2f} steps/s without (median of {len(outside)} windows), "
        f"{b:.2f} with (median of {len(inside)}): {100 * (a - b) / a:+.2f}% fewer steps/s"
    ]


def main() -> None:
    folder = Path(sys.argv[1])
    print((folder / "env.txt").read_text().strip())
    for name in ("idle_reservation", "input_bound", "input_workers", "healthy_pid"):
        print("\n".join(program(folder, name)))
    rates = results(folder)
    if "input_bound" in rates and "input_workers" in rates:
        print(
            f"input pipeline: {rates['input_bound']:.2f} steps/s with num_workers=0, "
            f"{rates['input_workers']:.2f} with 12 workers ({rates['input_workers'] / rates['input_bound']:.2f}x)"
        )
    print("\n".join(pid_cost(folder)))


if __name__ == "__main__":
    main()
