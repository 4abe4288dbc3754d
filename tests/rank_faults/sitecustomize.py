"""Faults for the node probe's ranks, injected from the test side: a folder the tests put first on
PYTHONPATH, so every rank torchrun starts imports this. ADVISOR_TEST_FAULT=RANK:KIND picks a rank
(torchrun's RANK) and a fault:

- `hang`: the rank's per-GPU measurement never returns (its watchdog is long);
- `die`: the rank kills itself (SIGKILL) as its collectives start (its measurements written);
- `slow`: every collective of the rank waits 50 ms first (a node behind a slow link);
- `gpu`: the rank's run counts as having measured a GPU (its diagnosis is dropped), so that the
  ranks disagree on whether there are GPUs, as a node with one unusable GPU does.

Nothing in probes/ knows of this: it patches the same functions a real fault would stop in.
"""

from __future__ import annotations

import os
import signal
import threading

_spec = os.environ.get("ADVISOR_TEST_FAULT", "")
if _spec and os.environ.get("RANK") == _spec.split(":")[0]:
    import probes.worker

    kind = _spec.split(":")[1]
    if kind == "hang":
        original_measure = probes.worker._measure_gpu

        def _hang(*args: object, **kwargs: object) -> object:
            threading.Event().wait()  # a GPU that never answers; the rank stays alive
            return original_measure(*args, **kwargs)  # type: ignore[arg-type]

        probes.worker._measure_gpu = _hang  # type: ignore[assignment]
    elif kind == "die":

        def _die(*args: object, **kwargs: object) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        probes.worker.run_collectives = _die  # type: ignore[assignment]
    elif kind == "slow":
        import time

        import probes.collectives

        original_op = probes.collectives.Collectives._op

        def _slow_op(self: object, op: str, nbytes: int) -> object:
            fn = original_op(self, op, nbytes)  # type: ignore[arg-type]

            def late() -> object:
                time.sleep(0.05)
                return fn()

            return late

        probes.collectives.Collectives._op = _slow_op  # type: ignore[method-assign]
    elif kind == "gpu":
        original_measure = probes.worker._measure_gpu

        def _as_if_gpu(*args: object, **kwargs: object) -> object:
            run = original_measure(*args, **kwargs)  # type: ignore[arg-type]
            run.diagnosis.clear()
            return run

        probes.worker._measure_gpu = _as_if_gpu  # type: ignore[assignment]
