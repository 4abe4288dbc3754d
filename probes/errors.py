"""The probe's own exception tree. Foreign errors (NVML, CUDA, torch) are mapped at the adapters."""

from __future__ import annotations

# What to do when torch or nvidia-ml-py is missing: both come with the package's "probe" extra.
INSTALL_PROBE_EXTRA = (
    "install the probe extra: pip install 'advisor[probe]' "
    "(from a clone: pip install -e '.[probe]')"
)


class ProbeError(Exception):
    """Base of every error the probe raises on purpose."""


class EnvironmentProblem(ProbeError):
    """The probe cannot measure a GPU here (exit code 3). `code` is a stable diagnosis id."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


class MeasurementError(ProbeError):
    """One measurement failed; the probe records it as an `error` check and goes on."""


class OutOfDeviceMemory(MeasurementError):
    """The device ran out of memory for this measurement's buffers."""


class WatchdogTimeout(MeasurementError):
    """A measurement did not finish within its time limit."""


class LockBusy(ProbeError):
    """Another probe holds this GPU."""
