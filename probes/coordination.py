"""How the ranks of a node probe find and wait for each other: torchrun's place of a rank, the
gloo coordination group (barriers that name the ranks that never came, flags every rank learns),
and the groups created for collectives, whose failures become text rather than tracebacks."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any


@dataclass(frozen=True)
class RankPlace:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0
    launched: bool = False  # started by torchrun (its rendezvous), not as a world of one

    @property
    def nodes(self) -> int:
        return self.world_size // self.local_world_size

    @classmethod
    def from_environ(cls, environ: dict[str, str]) -> RankPlace:
        """torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK)."""
        return cls(
            rank=int(environ["RANK"]),
            world_size=int(environ["WORLD_SIZE"]),
            local_rank=int(environ["LOCAL_RANK"]),
            local_world_size=int(environ["LOCAL_WORLD_SIZE"]),
            node_rank=int(environ.get("GROUP_RANK", "0")),
            launched=True,
        )


class BarrierTimeout(Exception):
    pass


@dataclass
class SubGroup:
    group: Any = None
    error: str | None = None


@dataclass
class Group:
    """The gloo coordination group, and the groups created for collectives."""

    torch: Any
    dist: Any
    coord: Any
    place: RankPlace
    timeout_s: float
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # soft barriers that timed out

    @classmethod
    def start(cls, loader: Callable[[], Any], place: RankPlace, timeout_s: float) -> Group:
        try:
            torch = loader()
            dist = torch.distributed
            if not dist.is_available():
                raise RuntimeError("this torch build has no torch.distributed")
        except (ImportError, AttributeError, RuntimeError) as exc:
            return cls(None, None, None, place, timeout_s, f"collectives not run: {exc}")
        timeout = timedelta(seconds=timeout_s)
        try:
            if not place.launched:
                dist.init_process_group(
                    "gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=timeout
                )
            else:  # torchrun's rendezvous: MASTER_ADDR / MASTER_PORT in the environment
                dist.init_process_group("gloo", timeout=timeout)
        except Exception as exc:  # any failure to join is a finding, not a crash
            return cls(torch, None, None, place, timeout_s, f"the coordination group failed: {exc}")
        return cls(torch, dist, dist.group.WORLD, place, timeout_s)

    def new(self, ranks: list[int], backend: str) -> SubGroup:
        try:
            group = self.dist.new_group(
                ranks, backend=backend, timeout=timedelta(seconds=self.timeout_s)
            )
        except Exception as exc:  # NCCL that cannot start is a check error
            return SubGroup(error=f"{backend} group of ranks {ranks} failed: {first_line(exc)}")
        return SubGroup(group)

    def ranks_where(self, flag: bool) -> list[int]:
        """The ranks for which `flag` is true, known to every rank."""
        torch, world = self.torch, self.place.world_size
        flags = torch.zeros(world, dtype=torch.int64)
        flags[self.place.rank] = int(flag)
        self.dist.all_reduce(flags, group=self.coord)
        return [i for i in range(world) if flags[i].item()]

    def new_coord(self, ranks: list[int]) -> Any:
        return self.dist.new_group(ranks, backend="gloo")

    def barrier(self, what: str, soft: bool = False) -> None:
        """Wait for every rank; the gloo monitored barrier names the ranks that never came."""
        if self.dist is None or self.place.world_size == 1:
            return
        try:
            self.dist.monitored_barrier(
                self.coord, timeout=timedelta(seconds=self.timeout_s), wait_all_ranks=True
            )
        except RuntimeError as exc:
            said = f"waited {self.timeout_s:g} s for every rank before {what}: {first_line(exc)}"
            if soft:
                self.notes.append(said)
                return
            raise BarrierTimeout(said) from None

    def close(self) -> None:
        if self.dist is not None:
            with contextlib.suppress(Exception):
                self.dist.destroy_process_group()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
