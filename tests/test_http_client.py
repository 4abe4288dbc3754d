"""advisor.http_client: which answers are retried and how long it waits, and that every httpx
exception is translated into advisor's own error tree at the boundary."""

from __future__ import annotations

import email.utils
import inspect
import time
from collections.abc import Callable

import httpx
import pytest

from advisor.errors import AdvisorError, InputError
from advisor.http_client import HttpClient, HttpError, RetryPolicy, Unreachable, service_url
from tests.ports import refused_port

Step = int | tuple[int, dict[str, str]] | Exception


class Service:
    """Answers from a script, one step per request: a status, (status, headers), or an exception
    to raise. The last step repeats. Records every request."""

    def __init__(self, *script: Step) -> None:
        self.script = list(script)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, Exception):
            raise step
        status, headers = step if isinstance(step, tuple) else (step, {})
        return httpx.Response(status, headers=headers, json={"status": status})


def client(
    service: Callable[[httpx.Request], httpx.Response],
    sleeps: list[float],
    token: str | None = None,
) -> HttpClient:
    return HttpClient(
        "http://svc:8080/",
        token,
        transport=httpx.MockTransport(service),
        sleep=sleeps.append,
    )


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_try_again_statuses_are_retried_until_an_answer(status: int) -> None:
    svc, sleeps = Service(status, status, 200), []
    reply = client(svc, sleeps).get("/v1/x")
    assert reply.status == 200 and len(svc.requests) == 3 and len(sleeps) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 408, 409, 413, 422, 500, 501])
def test_other_statuses_are_answered_at_once(status: int) -> None:
    svc, sleeps = Service(status), []
    reply = client(svc, sleeps).post("/v1/x", b"{}")
    assert reply.status == status and len(svc.requests) == 1 and sleeps == []


def test_gives_up_after_four_attempts_with_the_last_answer() -> None:
    svc, sleeps = Service(503), []
    reply = client(svc, sleeps).get("/v1/x")
    assert reply.status == 503 and len(svc.requests) == 4 and len(sleeps) == 3


def test_backoff_doubles_with_at_most_a_quarter_of_jitter() -> None:
    """0.5 s before the 2nd attempt, 1 s before the 3rd, 2 s before the 4th; each stretched by a
    random 0-25 % so that a fleet of probes does not come back in step."""
    svc, sleeps = Service(httpx.ConnectError("[Errno 111] Connection refused")), []
    with pytest.raises(Unreachable):
        client(svc, sleeps).get("/v1/x")
    assert len(svc.requests) == 4
    for waited, base in zip(sleeps, [0.5, 1.0, 2.0], strict=True):
        assert base <= waited <= base * 1.25


def test_retry_after_in_seconds_is_honoured() -> None:
    svc, sleeps = Service((429, {"Retry-After": "7"}), 200), []
    assert client(svc, sleeps).get("/v1/x").status == 200
    assert sleeps == [7.0]


def test_retry_after_is_capped() -> None:
    """A service asking for an hour does not hold a probe for an hour: 30 s at most a wait."""
    svc, sleeps = Service((503, {"Retry-After": "3600"}), 200), []
    assert client(svc, sleeps).get("/v1/x").status == 200
    assert sleeps == [30.0]


def test_retry_after_as_an_http_date() -> None:
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    svc, sleeps = Service((503, {"Retry-After": when}), 200), []
    assert client(svc, sleeps).get("/v1/x").status == 200
    assert 18.0 <= sleeps[0] <= 20.0  # whole seconds in the header, and the clock moved on


def test_a_post_is_not_repeated_once_sent() -> None:
    """The request went out and the answer was lost: the service may have stored it."""
    svc, sleeps = Service(httpx.ReadTimeout("timed out")), []
    with pytest.raises(Unreachable, match=r"^cannot reach http://svc:8080/v1/x: timed out$"):
        client(svc, sleeps).post("/v1/x", b"{}")
    assert len(svc.requests) == 1


def test_a_get_is_repeated_after_a_dropped_connection() -> None:
    svc, sleeps = Service(httpx.RemoteProtocolError("Server disconnected"), 200), []
    assert client(svc, sleeps).get("/v1/x").status == 200 and len(svc.requests) == 2


def test_a_refused_connection_is_retried_for_a_post_too() -> None:
    svc, sleeps = Service(httpx.ConnectError("refused"), 201), []
    assert client(svc, sleeps).post("/v1/x", b"{}").status == 201 and len(svc.requests) == 2


def test_headers_and_url() -> None:
    svc, sleeps = Service(200), []
    client(svc, sleeps, token="s3cret").get("/v1/x", {"limit": 5, "region": "us-east-1"})
    (request,) = svc.requests
    assert str(request.url) == "http://svc:8080/v1/x?limit=5&region=us-east-1"
    assert request.headers["Authorization"] == "Bearer s3cret"
    assert request.headers["User-Agent"].startswith("advisor/")
    client(svc, sleeps).get("/v1/x")
    assert "Authorization" not in svc.requests[1].headers


def test_a_body_that_is_not_json_is_an_http_error() -> None:
    reply = client(lambda _r: httpx.Response(200, text="<html>"), []).get("/v1/x")
    with pytest.raises(HttpError, match=r"^http://svc:8080/v1/x did not answer JSON \(HTTP 200\)"):
        reply.json()


@pytest.mark.parametrize("url", ["ftp://svc", "svc:8080", "http://", "https:///v1"])
def test_urls_that_are_not_http_are_bad_input(url: str) -> None:
    with pytest.raises(InputError, match=r"^--report-to needs an http\(s\) URL"):
        service_url(url, "--report-to")


def test_service_url_drops_the_trailing_slash() -> None:
    assert service_url("https://svc/base/", "--server") == "https://svc/base"


# --- the boundary: every exception httpx defines comes out as advisor's own ---------------------


def _httpx_exceptions() -> list[type[Exception]]:
    found = [
        cls
        for _, cls in inspect.getmembers(httpx, inspect.isclass)
        if issubclass(cls, Exception) and cls.__module__.startswith("httpx")
    ]
    assert len(found) >= 25  # httpx 0.28 defines 27; an empty list would prove nothing
    return found


def _instance(cls: type[Exception]) -> Exception:
    request = httpx.Request("GET", "http://svc:8080/v1/x")
    if cls is httpx.HTTPStatusError:
        return cls("boom", request=request, response=httpx.Response(500, request=request))
    try:
        return cls("boom")
    except TypeError:  # the stream errors take no message
        return cls()


@pytest.mark.parametrize("cls", _httpx_exceptions(), ids=lambda c: c.__name__)
def test_every_httpx_exception_is_translated(cls: type[Exception]) -> None:
    svc, sleeps = Service(_instance(cls)), []
    with pytest.raises(AdvisorError) as caught:
        client(svc, sleeps).get("/v1/x")
    assert isinstance(caught.value, HttpError)
    assert not isinstance(caught.value, httpx.HTTPError | httpx.InvalidURL | httpx.StreamError)
    no_answer = issubclass(cls, httpx.TransportError)
    assert isinstance(caught.value, Unreachable) == no_answer
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_bug_in_the_transport_is_not_disguised_as_a_network_error() -> None:
    def broken(_r: httpx.Request) -> httpx.Response:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        client(broken, []).get("/v1/x")


def test_a_real_refused_connection() -> None:
    sleeps: list[float] = []
    with refused_port() as port:
        http = HttpClient(
            f"http://127.0.0.1:{port}", retry=RetryPolicy(attempts=2), sleep=sleeps.append
        )
        with http, pytest.raises(Unreachable, match=f"^cannot reach http://127.0.0.1:{port}/x"):
            http.get("/x")
    assert len(sleeps) == 1


def test_commands_that_call_no_service_do_not_import_httpx() -> None:
    """httpx costs a tenth of a second to import: only a call to a service pays for it."""
    import subprocess
    import sys

    code = "import sys, advisor.cli, advisor.report_client; print('httpx' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"
