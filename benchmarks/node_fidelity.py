"""The node probe's collectives and peer copies beside plain references.

    python3 benchmarks/node_fidelity.py OUTDIR

Runs `advisor probe --full --json` (every GPU of the machine: all-reduce, all-gather and
reduce-scatter at 8M-4G, peer copies of 1 GiB), then benchmarks/collectives_ref.py under torchrun
on as many GPUs, and prints probe / reference per figure with the 0.95 target; the table is also
written to OUTDIR/node-fidelity.txt.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = 0.95
SIZES_MIB = ("64", "256", "1024", "4096")


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisor",
            "probe",
            "--full",
            "--json",
            "--output",
            str(out / "node-full.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads((out / "node-full.json").read_text())
    gpus = max(1, len(report["gpu_verdicts"]))
    ref_file = out / "collectives-ref.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(gpus),
            str(HERE / "collectives_ref.py"),
            str(ref_file),
            *SIZES_MIB,
        ],
        check=False,
    )
    reference = {
        r["name"]: r.get("busbw_gb_s", r.get("copy_gb_s")) for r in json.loads(ref_file.read_text())
    }
    measured = {}
    for m in report["measurements"]:
        if m.get("error") or m.get("value") is None:
            continue
        if m["name"] == "p2p_copy":
            measured[f"p2p_copy_{m['gpu']}_{m['peer']}"] = m["median"]
        elif m["params"].get("scope") == "node":
            measured[m["name"]] = m["median"]
    lines = [
        f"probe exit {probe.returncode}, verdict {report['verdict']}, {gpus} GPU(s)",
        f"{'figure':<24} {'probe':>10} {'reference':>10} {'ratio':>7}  target {TARGET}",
    ]
    for name, ref in reference.items():
        if name in measured and ref:
            ratio = measured[name] / ref
            flag = "" if ratio >= TARGET else "  BELOW"
            lines.append(f"{name:<24} {measured[name]:>10.1f} {ref:>10.1f} {ratio:>7.3f}{flag}")
    text = "\n".join(lines)
    print(text)
    (out / "node-fidelity.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
