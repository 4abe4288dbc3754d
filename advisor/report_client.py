"""Sends probe reports to the service, with retries and a local spool so that no report is lost.

If the service stays unreachable (connection errors, 5xx, 429) the report is written to the spool
directory; the next send first delivers what the spool holds, oldest first. A report the service
refuses as invalid (4xx other than 401/403/408/429) goes to spool/rejected/ with the reason,
so it is kept but not retried forever.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Transport = Callable[[str, bytes, dict[str, str], float], tuple[int, bytes]]
RETRY_STATUSES = {408, 429, 500, 502, 503, 504}
KEEP_STATUSES = {401, 403}  # a token problem is fixable: keep the report for the next run


def default_spool_dir() -> Path:
    configured = os.environ.get("ADVISOR_SPOOL_DIR")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "advisor" / "spool"


def urllib_transport(
    url: str, body: bytes, headers: dict[str, str], timeout: float
) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


@dataclass
class SendOutcome:
    sent: list[str] = field(default_factory=list)  # ids the service gave the delivered reports
    spooled: Path | None = None  # where this run's report waits, if it could not be delivered
    rejected: list[str] = field(default_factory=list)  # reasons for reports the service refused
    pending: int = 0  # reports still in the spool afterwards
    error: str | None = None


class ReportSender:
    def __init__(
        self,
        url: str,
        token: str | None,
        spool_dir: Path | None = None,
        *,
        attempts: int = 4,
        backoff_s: float = 0.5,
        timeout_s: float = 10.0,
        transport: Transport = urllib_transport,
        sleep: Callable[[float], None] = time.sleep,
        path: str = "/v1/probe-reports",
    ) -> None:
        """`path` picks the collection (probe or utilisation reports); each kind keeps its own
        spool folder below `spool_dir`, so that a flush never posts one kind to the other's URL."""
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--report-to needs an http(s) URL, got {url!r}")
        base = url.rstrip("/")
        self.endpoint = base if base.endswith(path) else base + path
        self.token = token
        spool = spool_dir or default_spool_dir()
        kind = path.rsplit("/", 1)[-1].removesuffix("-reports")  # utilisation, ...
        self.spool = spool if path == "/v1/probe-reports" else spool / kind
        self.attempts, self.backoff_s, self.timeout_s = attempts, backoff_s, timeout_s
        self.transport, self.sleep = transport, sleep

    def send(self, report: dict[str, Any]) -> SendOutcome:
        outcome = SendOutcome()
        reachable = self._flush(outcome)
        body = json.dumps(report).encode()
        status, detail = self._post(body) if reachable else (0, outcome.error or "")
        self._settle(status, detail, body, None, outcome)
        outcome.pending = len(self._spooled())
        return outcome

    def _flush(self, outcome: SendOutcome) -> bool:
        """Deliver spooled reports, oldest first; False as soon as the service is unreachable."""
        for path in self._spooled():
            status, detail = self._post(path.read_bytes())
            if status == 0 or status in RETRY_STATUSES:
                outcome.error = detail
                return False
            self._settle(status, detail, path.read_bytes(), path, outcome)
        return True

    def _settle(
        self, status: int, detail: str, body: bytes, path: Path | None, outcome: SendOutcome
    ) -> None:
        if status == 201:
            outcome.sent.append(_id(detail))
            if path is not None:
                path.unlink(missing_ok=True)
            return
        if status == 0 or status in RETRY_STATUSES or status in KEEP_STATUSES:
            outcome.error = detail if status == 0 else f"HTTP {status}: {detail}"
            if path is None:
                outcome.spooled = self._write(self.spool, body)
            return
        reason = f"HTTP {status}: {detail}"
        outcome.rejected.append(reason)
        rejected = self._write(self.spool / "rejected", body)
        rejected.with_suffix(".reason.txt").write_text(reason + "\n")
        if path is not None:
            path.unlink(missing_ok=True)

    def _post(self, body: bytes) -> tuple[int, str]:
        """(status, detail); status 0 = no answer. Retries with exponential backoff and jitter."""
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        status, detail = 0, ""
        for attempt in range(self.attempts):
            if attempt:
                self.sleep(self.backoff_s * 2 ** (attempt - 1) * (1 + random.random() / 4))
            try:
                status, raw = self.transport(self.endpoint, body, headers, self.timeout_s)
            except OSError as exc:  # URLError is an OSError: refused, DNS, timeout
                status, detail = 0, f"cannot reach {self.endpoint}: {getattr(exc, 'reason', exc)}"
                continue
            detail = raw.decode(errors="replace")[:500]
            if status not in RETRY_STATUSES:
                break
        return status, detail

    def _spooled(self) -> list[Path]:
        return sorted(self.spool.glob("*.json")) if self.spool.is_dir() else []

    @staticmethod
    def _write(directory: Path, body: bytes) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        name = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}.json"
        tmp = directory / f".{name}.tmp"
        tmp.write_bytes(body)
        os.replace(tmp, directory / name)  # a reader never sees half a report
        return directory / name


def _id(detail: str) -> str:
    try:
        return str(json.loads(detail).get("id", "?"))
    except (ValueError, AttributeError):
        return "?"
