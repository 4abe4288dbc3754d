"""`advisor doctor --torch`: a start-up hook the doctor puts first on the job's PYTHONPATH.

It changes nothing in the job's code and imports nothing until the job imports torch. Then it
counts, per line of the job's own code: host-device synchronisations (PyTorch's sync debug mode,
turned on when CUDA initialises, so a job that never touches CUDA is not made to), host-to-GPU
copies through Tensor.to / Tensor.cuda (bytes, from pageable memory or pinned, blocking or not),
and tensors a factory (torch.randn, zeros, ...) made on the CPU that are then moved. At exit it
writes what it counted as JSON to $ADVISOR_DOCTOR_TORCH_OUT/torch-<pid>.json, with the time its
own code took. Standard library only: the job's interpreter may not have advisor installed.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import time
import warnings
import weakref
from typing import Any

OUT_DIR = os.environ.get("ADVISOR_DOCTOR_TORCH_OUT")
SYNC_TEXT = "called a synchronizing CUDA operation"
FACTORIES = ("randn", "rand", "randint", "randperm", "zeros", "ones", "empty", "full", "arange",
             "linspace", "tensor", "eye")  # fmt: skip
TOP = 10  # sites kept per list, the busiest first
HERE = os.path.abspath(__file__)


class _Counts:
    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.hook_s = 0.0
        self.syncs: dict[str, list[float]] = {}  # site: [count, first, last]
        # site: [count, bytes, pageable, blocking, first, last]
        self.copies: dict[str, list[float]] = {}
        self.made: dict[str, list[float]] = {}  # creation site: [count, bytes, first, last]
        self.made_at: dict[int, tuple[Any, str]] = {}  # id(tensor): (weakref, creation site)
        self.torch: Any = None
        self.torch_dir = ""
        self.sync_armed = False


C = _Counts()


def _ours(filename: str) -> bool:
    """A frame of torch's or of this hook's: not the job's own code."""
    return filename.startswith(C.torch_dir) or filename == HERE


def _user_site(depth: int = 1) -> str | None:
    """file:line of the innermost frame of the job's own code (not torch's, not this hook's)."""
    frame = sys._getframe(depth)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (
            _ours(name)
            or name.startswith("<frozen")
            or name.endswith(("warnings.py", "contextlib.py"))
        ):
            return f"{os.path.relpath(name) if not name.startswith('<') else name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _caller_is_user(depth: int = 2) -> bool:
    return not _ours(sys._getframe(depth).f_code.co_filename)


def _on_warning(original: Any) -> Any:
    def showwarning(message: Any, category: Any, filename: str, lineno: int, *rest: Any) -> None:
        if SYNC_TEXT in str(message):
            t = time.perf_counter()
            site = _user_site() or f"{filename}:{lineno}"
            entry = C.syncs.setdefault(site, [0, t, t])
            entry[0] += 1
            entry[2] = t
            C.hook_s += time.perf_counter() - t
            return  # counted, not printed: the job's output stays its own
        original(message, category, filename, lineno, *rest)

    return showwarning


def _record_copy(tensor: Any, device: Any, non_blocking: bool) -> None:
    torch = C.torch
    if device is None or tensor.device.type != "cpu":
        return
    if torch.device(device).type != "cuda":
        return
    nbytes = tensor.numel() * tensor.element_size()
    site = _user_site() or "?"
    now = time.perf_counter()
    entry = C.copies.setdefault(site, [0, 0, 0, 0, now, now])
    entry[0] += 1
    entry[1] += nbytes
    entry[2] += 0 if tensor.is_pinned() else 1
    entry[3] += 0 if non_blocking else 1
    entry[5] = now
    made = C.made_at.get(id(tensor))
    if made is not None and made[0]() is tensor:
        count = C.made.setdefault(made[1], [0, 0, now, now])
        count[0] += 1
        count[1] += nbytes
        count[3] = now


def _wrap_to(original: Any) -> Any:
    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            device, _, non_blocking, _ = C.torch._C._nn._parse_to(*args, **kwargs)
            _record_copy(self, device, bool(non_blocking))
        except Exception:  # a call torch itself will reject: let it say why
            pass
        C.hook_s += time.perf_counter() - t
        out = original(self, *args, **kwargs)
        _arm_syncs()
        return out

    return to


def _wrap_cuda(original: Any) -> Any:
    def cuda(self: Any, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            target = "cuda" if device is None else C.torch.device("cuda", device) if isinstance(
                device, int) else device  # fmt: skip
            _record_copy(self, target, non_blocking)
        except Exception:
            pass
        C.hook_s += time.perf_counter() - t
        out = original(self, device, non_blocking, **kwargs)
        _arm_syncs()
        return out

    return cuda


def _forget(key: int) -> Any:
    def forget(_ref: Any) -> None:
        C.made_at.pop(key, None)

    return forget


def _wrap_factory(original: Any) -> Any:
    def factory(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        t = time.perf_counter()
        try:
            if out.device.type == "cpu" and _caller_is_user(2):
                key = id(out)
                site = _user_site() or "?"
                C.made_at[key] = (weakref.ref(out, _forget(key)), site)
        except Exception:
            pass
        C.hook_s += time.perf_counter() - t
        return out

    factory.__wrapped__ = original  # type: ignore[attr-defined]
    return factory


def _arm(torch: Any) -> None:
    """Wrap the copy and factory entry points, and arm sync counting for when CUDA starts."""
    C.torch = torch
    C.torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    warnings.showwarning = _on_warning(warnings.showwarning)
    warnings.filterwarnings("always", message=f".*{SYNC_TEXT}.*")
    torch.Tensor.to = _wrap_to(torch.Tensor.to)
    torch.Tensor.cuda = _wrap_cuda(torch.Tensor.cuda)
    for name in FACTORIES:
        if hasattr(torch, name):
            setattr(torch, name, _wrap_factory(getattr(torch, name)))
    lazy_init = torch.cuda._lazy_init

    def _lazy_init_and_watch() -> None:
        lazy_init()
        _arm_syncs()

    # the C++ side initialises CUDA through this attribute (torch/csrc/utils/device_lazy_init)
    torch.cuda._lazy_init = _lazy_init_and_watch


def _arm_syncs() -> None:
    """Once CUDA is up (never before: turning the mode on would initialise CUDA in a job that
    does not use it), warn on every synchronising call; the warnings are counted, not shown."""
    if not C.sync_armed and C.torch.cuda.is_initialized():
        C.sync_armed = True
        with warnings.catch_warnings():  # "a prototype feature": not the job's to hear
            warnings.simplefilter("ignore")
            C.torch._C._cuda_set_sync_debug_mode(1)  # 1: warn


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Arms the hook once `import torch` has run, whoever imports it."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = getattr(finder, "find_spec", lambda *_: None)(name, path, target)
            if spec is not None and spec.loader is not None:
                exec_module = spec.loader.exec_module

                def run(module: Any, exec_module: Any = exec_module) -> None:
                    exec_module(module)
                    _arm(module)

                spec.loader.exec_module = run
                return spec
        return None


def _top(counts: dict[str, Any], key: Any) -> list[tuple[str, Any]]:
    return sorted(counts.items(), key=key, reverse=True)[:TOP]


def _write() -> None:
    if OUT_DIR is None:
        return
    torch = C.torch
    wall = time.perf_counter() - C.start

    def span(first: float, last: float) -> float:
        return round(last - first, 4)

    copies = list(C.copies.values())
    body = {
        "torch_version": getattr(torch, "__version__", None) if torch else None,
        "cuda_used": bool(torch is not None and torch.cuda.is_initialized()),
        "wall_s": round(wall, 3),
        "syncs": int(sum(v[0] for v in C.syncs.values())),
        "sync_sites": [
            {"site": s, "count": int(v[0]), "span_s": span(v[1], v[2])}
            for s, v in _top(C.syncs, lambda kv: kv[1][0])
        ],
        "h2d_copies": int(sum(c[0] for c in copies)),
        "h2d_bytes": int(sum(c[1] for c in copies)),
        "h2d_pageable_bytes": int(sum(c[1] for c in copies if c[2])),
        "copy_sites": [
            {
                "site": s,
                "count": int(c[0]),
                "bytes": int(c[1]),
                "pageable": int(c[2]),
                "blocking": int(c[3]),
                "span_s": span(c[4], c[5]),
            }
            for s, c in _top(C.copies, lambda kv: kv[1][1])
        ],
        "made_on_host": [
            {"site": s, "count": int(c[0]), "bytes": int(c[1]), "span_s": span(c[2], c[3])}
            for s, c in _top(C.made, lambda kv: kv[1][0])
        ],
        "hook_s": round(C.hook_s, 4),
    }
    path = os.path.join(OUT_DIR, f"torch-{os.getpid()}.json")
    try:
        with open(path, "w") as f:
            json.dump(body, f)
    except OSError:
        pass  # the doctor says the statistics are missing


def _chain() -> None:
    """Run the sitecustomize this one shadows, if the job's interpreter has one."""
    here = os.path.dirname(HERE)
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None and spec.origin != HERE:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if OUT_DIR:
    if "torch" in sys.modules:
        _arm(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchFinder())
    atexit.register(_write)
_chain()
