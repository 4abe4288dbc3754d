"""Where a job's time went, as `advisor doctor` reports it: the share of the job's main thread's
stack samples in each stage (advisor.fleet.stages classifies them). Part of the job report's
schema, so it lives with the probes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_STAGE_ITEMS = 64
MAX_STAGE_TEXT = 4096

Stage = Literal[
    "gpu_wait",  # waiting for the GPU: a CUDA synchronisation, a read of a GPU value
    "data_loading",  # inside the DataLoader: fetching a batch, or waiting for its workers
    "collective",  # inside torch.distributed: waiting for the other ranks in a collective
    "host_compute",  # the job's own Python computing on the CPU (preprocessing, NumPy)
    "waiting",  # idle: sleep, I/O, a lock or a queue outside the DataLoader
    "launch",  # inside PyTorch: its Python layers and the kernels they queue
    "copy",  # a host-device copy at the job's line
    "periodic",  # the job's periodic work: checkpoints, logging, metrics writers
    "other",  # a sample with no Python frame to place it
]

STAGE_WORDS: dict[str, str] = {
    "gpu_wait": "waiting for the GPU (CUDA synchronisation)",
    "data_loading": "data loading (DataLoader)",
    "collective": "waiting in collectives (torch.distributed)",
    "host_compute": "host preprocessing (the job's own Python)",
    "waiting": "waiting (I/O, sleep, locks)",
    "launch": "PyTorch calls and kernel launches",
    "copy": "host-device copies",
    "periodic": "periodic work (checkpoints, logging)",
    "other": "unplaced (no Python frame)",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StageSite(_Model):
    """A line of the job's code (the innermost frame outside libraries) within a stage."""

    site: str = Field(max_length=MAX_STAGE_TEXT)  # file:line
    share: float = Field(ge=0, le=1)  # of all the samples, not of the stage's
    code: str | None = Field(None, max_length=MAX_STAGE_TEXT)  # the line's text, when readable


class StageShare(_Model):
    stage: Stage
    share: float = Field(ge=0, le=1)  # of the main thread's samples
    samples: int = Field(ge=0)
    sites: list[StageSite] = Field(default_factory=list, max_length=MAX_STAGE_ITEMS)


class StageReport(_Model):
    """The main thread of the job's main Python process, sampled by py-spy."""

    pid: int
    rank: int | None = None  # the process's RANK under torchrun (or any launcher that sets it)
    samples: int = Field(ge=0)  # placed in a stage
    startup_samples: int = Field(0, ge=0)  # inside an import: the job's start-up, left out
    interval_s: float = Field(gt=0)
    shares: list[StageShare] = Field(default_factory=list, max_length=MAX_STAGE_ITEMS)
    # data loading ran in the main process (DataLoader num_workers=0) rather than in workers
    loading_in_process: bool | None = None
    # findings the stages dismissed, and why (a stage below the material share)
    notes: list[str] = Field(default_factory=list, max_length=MAX_STAGE_ITEMS)
