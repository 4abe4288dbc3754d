"""Probe fidelity and speed on a GPU machine, in one run, beside independent references.

    python3 benchmarks/probe_fidelity.py OUTDIR [ACCELERATOR]

1. references: benchmarks/memcpy_ref.cu (plain CUDA C cudaMemcpyAsync, compiled here with nvcc)
   and benchmarks/matmul_ref.py (plain torch `a @ b` loop, best rate);
2. `advisor probe --quick` and `--full` as a user runs them (interpreter start and torch import
   included in the wall time), JSON saved;
3. verdicts against the catalog's entry of the GPU (ACCELERATOR, h200-sxm unless given) and
   against a faster accelerator (MI300X);
4. two probes started at once on one GPU: the second must wait or refuse;
then prints the comparison table (also written to OUTDIR/fidelity.txt).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGETS = {  # check -> (reference key, minimum ratio probe / reference)
    "matmul_bf16": ("matmul_bf16", 0.97),
    "h2d_pinned": ("h2d_pinned", 0.97),
    "d2h_pinned": ("d2h_pinned", 0.97),
    "d2d": ("d2d", 0.95),
}


def sh(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def probe(out: Path, name: str, *args: str) -> tuple[dict[str, Any], float, int]:
    t0 = time.perf_counter()
    p = sh(
        [
            sys.executable,
            "-m",
            "advisor",
            "probe",
            "--json",
            "--output",
            str(out / f"{name}.json"),
            *args,
        ]
    )
    wall = time.perf_counter() - t0
    with (out / "probe-stderr.txt").open("a") as log:  # few files: the device returns at most 8
        log.write(f"== {name}: exit {p.returncode}, {wall:.1f} s\n{p.stderr}\n")
    return json.loads(p.stdout), wall, p.returncode


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "fidelity-out")
    out.mkdir(parents=True, exist_ok=True)
    binary = Path("/tmp/advisor-memcpy_ref")
    build = sh(["nvcc", "-O2", "-o", str(binary), str(HERE / "memcpy_ref.cu")])
    if build.returncode:
        sys.exit(f"nvcc failed: {build.stderr}")
    lines: list[str] = []

    quick, quick_wall, quick_rc = probe(out, "probe-quick", "--quick")
    full, full_wall, full_rc = probe(out, "probe-full", "--full")
    ref_copy = dict(
        (k, float(v))
        for k, v in (ln.split() for ln in sh([str(binary), "1024", "20"]).stdout.splitlines())
    )
    ref_mm = {}
    for ln in sh([sys.executable, str(HERE / "matmul_ref.py"), "8192"]).stdout.splitlines():
        dtype, best, _median = ln.split()
        ref_mm[f"matmul_{dtype}"] = float(best)
    refs = {**ref_copy, **ref_mm}
    (out / "probe-stderr.txt").open("a").write(f"references: {json.dumps(refs)}\n")

    measured = {m["name"]: m for m in full["measurements"]}
    inv = full["inventory"]
    gpu = inv["gpu"]
    lines.append(
        f"# probe fidelity on {gpu['name']}, driver {inv['driver_version']}, "
        f"CUDA {inv['cuda_driver_version']}, torch {inv['torch_version']}, "
        f"{time.strftime('%Y-%m-%d')}"
    )
    lines.append(
        f"{'figure':<16} {'probe --full':>14} {'reference':>12} {'ratio':>7} {'target':>7}  met"
    )
    ok = True
    for check, (ref_key, target) in TARGETS.items():
        value = measured[check]["value"]
        ref = refs[ref_key]
        ratio = value / ref
        met = ratio >= target
        ok &= met
        lines.append(
            f"{check:<16} {value:>14.1f} {ref:>12.1f} {ratio:>7.3f} {target:>7.2f}  {'yes' if met else 'NO'}"
        )
    for extra in (
        "h2d_pageable",
        "d2h_pageable",
        "bidir_pinned",
        "matmul_fp16",
        "matmul_tf32",
        "matmul_fp32",
    ):
        if extra in measured and extra in refs and measured[extra]["value"]:
            v, r = measured[extra]["value"], refs[extra]
            lines.append(f"{extra:<16} {v:>14.1f} {r:>12.1f} {v / r:>7.3f} {'-':>7}  (info)")
    overlap = measured["stream_overlap"]
    met = overlap["value"] >= 0.95
    ok &= met
    p = overlap["params"]
    lines.append(
        f"{'stream_overlap':<16} {overlap['value']:>14.3f} {'':>12} {'':>7} {0.95:>7.2f}  {'yes' if met else 'NO'}"
        f"   (copy {p['copy_ms']:.1f} ms, compute {p['compute_ms']:.1f}, concurrent {p['concurrent_ms']:.1f}, serial {p['serial_ms']:.1f})"
    )
    for name, wall, limit in (
        ("probe --quick wall", quick_wall, 15),
        ("probe --full wall", full_wall, 60),
    ):
        met = wall <= limit
        ok &= met
        lines.append(
            f"{name:<16} {wall:>13.1f}s {'':>12} {'':>7} {limit:>6}s  {'yes' if met else 'NO'}"
        )
    lines.append(
        f"verdict --quick (no --expect): {quick['verdict']} (exit {quick_rc}); --full: {full['verdict']} (exit {full_rc})"
    )

    gpu = sys.argv[2] if len(sys.argv) > 2 else "h200-sxm"
    own, _, own_rc = probe(out, "probe-expect-own", "--quick", "--expect", gpu)
    faster, _, faster_rc = probe(out, "probe-expect-mi300x", "--quick", "--expect", "mi300x")
    ok &= own["verdict"] == "pass" and faster["verdict"] == "fail"
    lines.append(f"--expect {gpu}: {own['verdict']} (exit {own_rc})")
    lines.append(f"--expect mi300x:   {faster['verdict']} (exit {faster_rc}); why:")
    for c in faster["checks"]:
        if c["status"] in ("fail", "warn"):
            lines.append(f"    {c['name']}: {c['status']}: {c['detail']}")

    # Two probes at once on one GPU: the second refuses (or waits) and says so.
    first = subprocess.Popen(
        [sys.executable, "-m", "advisor", "probe", "--full", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(8)  # past torch import and inventory: the first now holds the lock for ~15 s
    second = sh(
        [sys.executable, "-m", "advisor", "probe", "--quick", "--lock-wait-s", "1", "--json"]
    )
    first.wait()
    said = [ln for ln in second.stderr.splitlines() if "another probe" in ln or "waiting" in ln]
    lock_ok = second.returncode == 3 and bool(said)
    ok &= lock_ok
    lines.append(
        f"second probe while one runs: exit {second.returncode}: {said[-1] if said else second.stderr[-300:]}"
    )
    lines.append(f"all targets met: {'yes' if ok else 'NO'}")
    text = "\n".join(lines)
    print(text)
    (out / "fidelity.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
