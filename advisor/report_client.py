"""Sends probe and utilisation reports to the service, with retries and a local spool so that no
report is lost.

Each post goes through advisor.http_client (retried on connection errors, 429, 502-504). If the
service stays unreachable, or answers 408, 429 or 5xx, the report is written to the spool
directory; the next send first delivers what the spool holds, oldest first. A report the service
refuses as invalid (4xx other than 401/403/408/429) goes to spool/rejected/ with the reason,
so it is kept but not retried forever.

Each report gets an Idempotency-Key, a UUID made once and kept in its spool file's name: a report
the service stored but whose answer was lost is sent again with the same key, and the service
answers 200 with the one it stored instead of storing it twice.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.http_client import HttpClient, HttpError, RetryPolicy, service_url
from advisor.outputs import write_atomically

if TYPE_CHECKING:
    import httpx

# Answers after which the report waits in the spool: the service may well take it later.
SPOOL_STATUSES = {408, 429, 500, 502, 503, 504}
KEEP_STATUSES = {401, 403}  # a token problem is fixable: keep the report for the next run


def default_spool_dir() -> Path:
    configured = os.environ.get("ADVISOR_SPOOL_DIR")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "advisor" / "spool"


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
        retry: RetryPolicy | None = None,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        path: str = "/v1/probe-reports",
    ) -> None:
        """`path` picks the collection (probe or utilisation reports); each kind keeps its own
        spool folder below `spool_dir`, so that a flush never posts one kind to the other's URL.
        `transport` is the test seam, handed to HttpClient. InputError for a URL that is not
        http(s)."""
        base = service_url(url, "--report-to")
        self.endpoint = base if base.endswith(path) else base + path
        self.token = token
        spool = spool_dir or default_spool_dir()
        kind = path.rsplit("/", 1)[-1].removesuffix("-reports")  # utilisation, ...
        self.spool = spool if path == "/v1/probe-reports" else spool / kind
        self.token, self.retry, self.timeout_s = token, retry, timeout_s
        self.transport, self.sleep = transport, sleep

    def send(self, report: dict[str, Any]) -> SendOutcome:
        outcome = SendOutcome()
        with HttpClient(
            self.endpoint,
            self.token,
            flag="--report-to",
            timeout_s=self.timeout_s,
            retry=self.retry,
            transport=self.transport,
            sleep=self.sleep,
        ) as client:
            reachable = self._flush(client, outcome)
            body, key = json.dumps(report).encode(), uuid.uuid4().hex
            status, detail = (
                self._post(client, body, key) if reachable else (0, outcome.error or "")
            )
        self._settle(status, detail, body, key, None, outcome)
        outcome.pending = len(self._spooled())
        return outcome

    def _flush(self, client: HttpClient, outcome: SendOutcome) -> bool:
        """Deliver spooled reports, oldest first; False as soon as the service is unreachable."""
        for path in self._spooled():
            key = _spooled_key(path)
            status, detail = self._post(client, path.read_bytes(), key)
            if status == 0 or status in SPOOL_STATUSES:
                outcome.error = detail
                return False
            self._settle(status, detail, path.read_bytes(), key, path, outcome)
        return True

    def _settle(
        self,
        status: int,
        detail: str,
        body: bytes,
        key: str | None,
        path: Path | None,
        outcome: SendOutcome,
    ) -> None:
        if status in (200, 201):  # 200: stored by an earlier attempt whose answer was lost
            outcome.sent.append(_id(detail))
            if path is not None:
                path.unlink(missing_ok=True)
            return
        if status == 0 or status in SPOOL_STATUSES or status in KEEP_STATUSES:
            outcome.error = detail if status == 0 else f"HTTP {status}: {detail}"
            if path is None:
                outcome.spooled = self._write(self.spool, body, key)
            return
        reason = f"HTTP {status}: {detail}"
        outcome.rejected.append(reason)
        rejected = self._write(self.spool / "rejected", body, key)
        write_atomically(rejected.with_suffix(".reason.txt"), reason + "\n")
        if path is not None:
            path.unlink(missing_ok=True)

    @staticmethod
    def _post(client: HttpClient, body: bytes, key: str | None) -> tuple[int, str]:
        """(status, detail); status 0 = no answer. HttpClient retries what is worth retrying."""
        try:
            reply = client.post("", body, headers={"Idempotency-Key": key} if key else None)
        except HttpError as exc:
            return 0, str(exc)
        return reply.status, reply.text(500)

    def _spooled(self) -> list[Path]:
        return sorted(self.spool.glob("*.json")) if self.spool.is_dir() else []

    @staticmethod
    def _write(directory: Path, body: bytes, key: str | None) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        name = f"{time.strftime('%Y%m%dT%H%M%S')}-{key or uuid.uuid4().hex[:8]}.json"
        return write_atomically(directory / name, body)  # a reader never sees half a report


def _spooled_key(path: Path) -> str | None:
    """The Idempotency-Key in a spool file's name (TIME-KEY.json). None for a file spooled before
    keys (TIME-8HEX.json: too short to be unique in a fleet): the service then keys it by its
    content, which does not change between attempts either."""
    key = path.stem.partition("-")[2]
    return key if len(key) == 32 else None


def _id(detail: str) -> str:
    try:
        return str(json.loads(detail).get("id", "?"))
    except (ValueError, AttributeError):
        return "?"
