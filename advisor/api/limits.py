"""Request body size limit (413), enforced before the body reaches any route; and a response
sent before the request's body was read to its end (a 401 before an anonymous body is parsed,
a 413) says `Connection: close` (RFC 9112, section 9.6): the server drops the rest of that body
and closes (advisor/api/server.py), and a client that kept the connection for its next request
lost that request under load ("Server disconnected without sending a response")."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from advisor.api.problems import problem_json

CLOSE = (b"connection", b"close")


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        seen = 0
        started = rejected = False
        headers = dict(scope.get("headers") or [])
        complete = b"transfer-encoding" not in headers and declared in (None, b"0")

        async def limited_receive() -> Message:
            nonlocal seen, rejected, complete
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                complete = complete or not message.get("more_body", False)
                if seen > self.max_bytes and not rejected:
                    # A chunked body has no Content-Length to trust: answer 413 now and tell the
                    # app the client is gone, so that it stops reading (its reply is dropped).
                    rejected = True
                    if not started:
                        await self._reject(send)
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if rejected:
                return
            if message["type"] == "http.response.start":
                started = True
                if not complete:
                    message = {**message, "headers": [*message.get("headers", ()), CLOSE]}
            await send(message)

        await self.app(scope, limited_receive, tracking_send)

    async def _reject(self, send: Send) -> None:
        body = problem_json(
            413, "Content Too Large", f"request body is larger than {self.max_bytes} bytes"
        )
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/problem+json"),
                    (b"content-length", str(len(body)).encode()),
                    CLOSE,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
