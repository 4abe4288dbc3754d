"""The one HTTP client advisor uses to talk to a service: the review's --server source, the
fleet calibration of `recommend`/`estimate --server`, and the report sender of probe/monitor.

It wraps httpx with a small retry policy: a few attempts with exponential backoff and jitter on
the answers that mean "try again shortly" (429, 502, 503, 504, honouring Retry-After up to a cap)
and on connection failures; never on other 4xx, which another attempt would only repeat. httpx's
exceptions stop here: every one is translated into HttpError (or Unreachable, when no answer came)
of advisor's own tree, so callers catch one family. httpx is imported on first use: commands
that never call a service do not pay for it.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import random
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from advisor import __version__
from advisor.errors import AdvisorError, InputError

if TYPE_CHECKING:
    import httpx

RETRY_STATUSES = frozenset({429, 502, 503, 504})


class HttpError(AdvisorError):
    """A call to a service failed: the answer could not be read or was not what was asked for."""


class Unreachable(HttpError):
    """No answer at all: connection refused, name not resolved, timed out, connection dropped."""


def service_url(url: str, flag: str) -> str:
    """`url` without its trailing slash; InputError when it is not an http(s) URL with a host."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{flag} needs an http(s) URL, got {url!r}")
    return url.rstrip("/")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    backoff_s: float = 0.5  # before the 2nd attempt; doubled before each further one
    max_delay_s: float = 30.0  # cap on a single wait, Retry-After included

    def delay_s(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before attempt number `attempt` (2, 3, ...)."""
        backoff = self.backoff_s * 2.0 ** (attempt - 2) * (1 + random.random() / 4)
        asked = _retry_after_s(retry_after)
        return min(max(backoff, asked or 0.0), self.max_delay_s)


def _retry_after_s(value: str | None) -> float | None:
    """Retry-After as seconds: either a number of seconds or an HTTP date."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max((when - dt.datetime.now(dt.UTC)).total_seconds(), 0.0)


@dataclass(frozen=True)
class Reply:
    """A service's answer, whatever its status: the caller decides what a status means."""

    url: str
    status: int
    content: bytes

    def text(self, limit: int = 500) -> str:
        return self.content.decode(errors="replace")[:limit]

    def json(self) -> Any:
        try:
            return json.loads(self.content)
        except ValueError:
            raise HttpError(f"{self.url} did not answer JSON (HTTP {self.status})") from None


class HttpClient:
    """Calls below one base URL, with a bearer token if given. Thread-safe: the review fetches
    report bodies from several threads over one pool of kept-alive connections."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        flag: str = "--server",
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        connections: int = 10,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`transport` is the test seam (an httpx.MockTransport); `flag` names the option the URL
        came from, for the error message."""
        import httpx

        self.base = service_url(base_url, flag)
        self.retry = retry or RetryPolicy()
        self.sleep = sleep
        headers = {"User-Agent": f"advisor/{__version__}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.Client(
            headers=headers,
            timeout=timeout_s,
            transport=transport,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            follow_redirects=True,  # the Authorization header is dropped on a change of host
        )

    def get(self, path: str, params: Mapping[str, str | int] | None = None) -> Reply:
        return self._call("GET", path, params=params)

    def post(
        self,
        path: str,
        content: bytes,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        return self._call(
            "POST", path, content=content, headers={"Content-Type": content_type, **(headers or {})}
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> Reply:
        url = self.base + path
        attempt = 1
        while True:
            try:
                response = self._client.request(method, url, **kwargs)
            except _foreign_errors() as exc:
                if attempt >= self.retry.attempts or not _retriable(exc, method):
                    raise _translate(exc, url) from None
                retry_after = None
            else:
                status = response.status_code
                if status not in RETRY_STATUSES or attempt >= self.retry.attempts:
                    return Reply(url, status, response.content)
                retry_after = response.headers.get("Retry-After")
            attempt += 1
            self.sleep(self.retry.delay_s(attempt, retry_after))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _foreign_errors() -> tuple[type[Exception], ...]:
    """Every exception httpx raises: its HTTPError tree and the three outside it."""
    import httpx

    return (httpx.HTTPError, httpx.InvalidURL, httpx.CookieConflict, httpx.StreamError)


def _retriable(exc: Exception, method: str) -> bool:
    """A connection that never opened can always be tried again; one that failed after the
    request went out only for a GET, since a POST may have been stored already."""
    import httpx

    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return True
    return method == "GET" and isinstance(
        exc, httpx.ReadError | httpx.ReadTimeout | httpx.RemoteProtocolError | httpx.WriteError
    )


def _translate(exc: Exception, url: str) -> HttpError:
    """httpx's exception as advisor's: Unreachable when no answer came, else HttpError."""
    import httpx

    reason = str(exc) or exc.__class__.__name__
    if isinstance(exc, httpx.TransportError):
        return Unreachable(f"cannot reach {url}: {reason}")
    return HttpError(f"{url}: {reason}")
