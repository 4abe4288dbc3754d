"""`advisor serve --log-format json`: one JSON object per log line, for log collectors.

Every record has `time` (RFC 3339, UTC), `level`, `logger` and `message`; uvicorn's access
records add `client`, `method`, `path`, `http_version` and `status` as fields of their own, so
that a collector never parses the sentence.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

ACCESS_FIELDS = ("client", "method", "path", "http_version", "status")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            body.update(zip(ACCESS_FIELDS, args, strict=True))
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str)


def logging_config(level: str) -> dict[str, Any]:
    """A logging.config.dictConfig for uvicorn (passed as its log_config) and the root logger:
    every line on stderr, as JSON."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"json": handler},
        "root": {"handlers": ["json"], "level": level.upper()},
        "loggers": {
            name: {"handlers": ["json"], "level": level.upper(), "propagate": False}
            for name in ("uvicorn", "uvicorn.error", "uvicorn.access")
        },
    }
