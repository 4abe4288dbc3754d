"""In-memory fake of advisor.store.Store, for tests of code that needs a store but not a database.

It lives with the tests, not in the package: a service cannot be started on it by mistake."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Iterator

from advisor.fleet.digest import FleetDigest, digest_of
from advisor.fleet.records import probe_record, report_fields
from advisor.store.base import (
    FleetSummary,
    HostRatios,
    ReportFilter,
    ReportSummary,
    StoredReport,
    StoredUtilisation,
    UtilisationSummary,
    canonical_json,
    check_rows,
    idempotency_key,
    utilisation_figures,
)
from probes.ops_table import OpsReport, stored_form
from probes.report import ProbeReport, UtilisationReport
from tests.fleet_scan import host_ratios_of, stored_probe_report, summarize_fleet


class MemoryStore:
    def __init__(self) -> None:
        self._reports: dict[str, StoredReport] = {}
        self._utilisation: dict[str, StoredUtilisation] = {}
        self._keys: dict[str, str] = {}  # idempotency key -> report id
        self._utilisation_keys: dict[str, str] = {}  # the same, for utilisation reports
        self._ops: list[tuple[str, dt.datetime, OpsReport]] = []
        self._ops_keys: dict[str, str] = {}
        self._token_ids: dict[str, str | None] = {}  # report id -> its write token's id
        self._lock = threading.RLock()

    def add(self, report: ProbeReport, received_at: dt.datetime | None = None) -> StoredReport:
        host, accelerator, verdict = report_fields(report)
        stored = StoredReport(
            uuid.uuid4().hex,
            received_at or dt.datetime.now(dt.UTC),
            host,
            accelerator,
            verdict,
            report.model_dump(mode="json"),
        )
        with self._lock:
            self._reports[stored.id] = stored
        return stored

    def add_once(
        self,
        report: ProbeReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
        token_id: str | None = None,
    ) -> tuple[StoredReport, bool]:
        key = idempotency_key(canonical_json(report.model_dump(mode="json")), client_key)
        with self._lock:
            if key in self._keys:
                return self._reports[self._keys[key]], False
            stored = self.add(report, received_at)  # (the lock is reentrant)
            self._keys[key] = stored.id
            self._token_ids[stored.id] = token_id
            return stored, True

    def get(self, report_id: str) -> StoredReport | None:
        return self._reports.get(report_id)

    def query(self, flt: ReportFilter) -> tuple[list[StoredReport], int]:
        found = [
            r
            for r in self._reports.values()
            if (flt.host is None or r.host == flt.host)
            and (flt.accelerator is None or r.accelerator == flt.accelerator)
            and (flt.verdict is None or r.verdict == flt.verdict)
            and (flt.since is None or r.received_at >= flt.since)
            and (flt.until is None or r.received_at < flt.until)
        ]
        found.sort(key=lambda r: (r.received_at, r.id), reverse=True)
        return found[flt.offset : flt.offset + flt.limit], len(found)

    def summaries(self, flt: ReportFilter) -> tuple[list[ReportSummary], int]:
        page, total = self.query(flt)
        listed = [
            ReportSummary(r.id, r.received_at, r.host, r.accelerator, r.verdict) for r in page
        ]
        return listed, total

    def fleet(self, accelerator: str | None = None, check: str | None = None) -> list[FleetSummary]:
        chosen = [
            r for r in self._reports.values() if accelerator is None or r.accelerator == accelerator
        ]
        verdicts: dict[str | None, list[str]] = {}
        rows = []
        for r in chosen:
            verdicts.setdefault(r.accelerator, []).append(r.verdict)
            rows += [
                row
                for row in check_rows(
                    r.id, stored_probe_report(r.report), self._token_ids.get(r.id)
                )
                if check in (None, row.name)
            ]
        return summarize_fleet(rows, verdicts)

    def host_ratios(self, check: str) -> list[HostRatios]:
        with self._lock:
            reports = list(self._reports.values())
        rows = [
            row
            for r in reports
            if r.accelerator is not None
            for row in check_rows(r.id, stored_probe_report(r.report), self._token_ids.get(r.id))
            if row.name == check
        ]
        return host_ratios_of(rows)

    def add_utilisation(
        self, report: UtilisationReport, received_at: dt.datetime | None = None
    ) -> StoredUtilisation:
        body = report.model_dump(mode="json")
        stored = StoredUtilisation(
            uuid.uuid4().hex,
            received_at or dt.datetime.now(dt.UTC),
            report.host,
            *utilisation_figures(body),
            body,
        )
        with self._lock:
            self._utilisation[stored.id] = stored
        return stored

    def add_utilisation_once(
        self,
        report: UtilisationReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
    ) -> tuple[StoredUtilisation, bool]:
        key = idempotency_key(canonical_json(report.model_dump(mode="json")), client_key)
        with self._lock:
            if key in self._utilisation_keys:
                return self._utilisation[self._utilisation_keys[key]], False
            stored = self.add_utilisation(report, received_at)  # (the lock is reentrant)
            self._utilisation_keys[key] = stored.id
            return stored, True

    def get_utilisation(self, report_id: str) -> StoredUtilisation | None:
        return self._utilisation.get(report_id)

    def query_utilisation(
        self, host: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[UtilisationSummary], int]:
        found = [r for r in self._utilisation.values() if host is None or r.host == host]
        found.sort(key=lambda r: (r.received_at, r.id), reverse=True)
        page = [
            UtilisationSummary(r.id, r.received_at, r.host, r.instance_type, r.gpus, r.findings)
            for r in found[offset : offset + limit]
        ]
        return page, len(found)

    def iter_utilisation(self) -> Iterator[StoredUtilisation]:
        with self._lock:
            chosen = sorted(self._utilisation.values(), key=lambda r: (r.received_at, r.id))
        return iter(chosen)

    def fleet_digest(self) -> FleetDigest:
        """The digest by one pass over every stored report (advisor.fleet.digest.digest_of)."""
        with self._lock:
            chosen = sorted(self._reports.values(), key=lambda r: (r.received_at, r.id))
        return digest_of([probe_record(r.id, stored_probe_report(r.report)) for r in chosen])

    def add_ops(
        self, report: OpsReport, client_key: str | None, received_at: dt.datetime | None = None
    ) -> tuple[str, bool]:
        key = idempotency_key(canonical_json(stored_form(report)), client_key)
        with self._lock:
            if key in self._ops_keys:
                return self._ops_keys[key], False
            report_id = uuid.uuid4().hex
            self._ops.append((report_id, received_at or dt.datetime.now(dt.UTC), report))
            self._ops_keys[key] = report_id
            return report_id, True

    def ops_tables(self, accelerator: str) -> list[OpsReport]:
        with self._lock:
            mine = [o for o in self._ops if o[2].table.accelerator == accelerator]
        return [r for _, _, r in sorted(mine, key=lambda o: (o[1], o[0]), reverse=True)]

    def ops_tables_count(self, accelerator: str) -> int:
        with self._lock:
            return sum(o[2].table.accelerator == accelerator for o in self._ops)

    def count(self) -> int:
        return len(self._reports)

    def ping(self) -> None:
        return None

    def close(self) -> None:
        return None
