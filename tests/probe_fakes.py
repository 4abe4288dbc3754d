"""Fakes at the torch seam of the probe (NVML has its own fake: tests.fake_nvml)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

H200_PROPS = SimpleNamespace(
    name="NVIDIA H200",
    major=9,
    minor=0,
    multi_processor_count=132,
    uuid="00000000-fake-h200",  # NVML's UUID without its "GPU-" prefix, as torch gives it
)


@dataclass
class FakeCuda:
    """torch.cuda as probes.environment and probes.device use it; records synchronisations."""

    available: bool = True
    count: int = 1
    props: Any = field(default_factory=lambda: H200_PROPS)
    init_error: str | None = None
    free: int = 140 << 30
    calls: list[str] = field(default_factory=list)

    def is_available(self) -> bool:
        return self.available

    def init(self) -> None:
        if self.init_error is not None:
            raise RuntimeError(self.init_error)

    def device_count(self) -> int:
        return self.count

    def get_device_properties(self, index: int) -> Any:
        return self.props

    def mem_get_info(self, device: object) -> tuple[int, int]:
        return self.free, self.free

    def synchronize(self, device: object = None) -> None:
        self.calls.append("synchronize")

    def empty_cache(self) -> None:
        self.calls.append("empty_cache")


def fake_torch(cuda_version: str | None = "13.0", **cuda: Any) -> Any:
    """A torch module stand-in: version strings, torch.device and a FakeCuda."""
    return SimpleNamespace(
        __version__="2.11.0+cu130" if cuda_version else "2.11.0+cpu",
        version=SimpleNamespace(cuda=cuda_version),
        cuda=FakeCuda(**cuda),
        device=lambda spec: spec,
    )
