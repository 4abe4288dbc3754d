"""A pitfall of the doctor's unseen jobs: the DataLoader with no workers (num_workers=0), so
the main process runs the CPU-heavy per-sample transform between GPU steps while the GPU waits.
Expected: input_bound in the main process at the transform's line; no transfer_bound (the
pageable copies take little of the time). Its fix: input_workers.py."""

from __future__ import annotations

from input_pipeline import train

train("input_bound", workers=0)
