"""A training loop fed by a DataLoader whose per-sample transform is CPU-heavy Python:
num_workers=0 (the first argument) loads in the main process."""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> torch.Tensor:
        values = [float((i * j) % 7) for j in range(30_000)]  # the transform: pure Python
        return torch.tensor(values[:64])


def main(workers: int, seconds: float) -> None:
    model = torch.nn.Linear(64, 64)
    end = time.monotonic() + seconds
    for batch in DataLoader(Slow(), batch_size=4, num_workers=workers):
        model(batch).sum().backward()
        if time.monotonic() > end:
            break


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 0,
        float(sys.argv[2]) if len(sys.argv) > 2 else 30.0,
    )
