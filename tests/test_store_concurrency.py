"""The stores under several processes and threads: simultaneous first opens of a fresh file
(every one migrates, none fails), and reads that neither wait for a writer nor queue behind one
another; PostgreSQL's migration and its connection pool."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.store import SqlStore, StoreError, migrate, open_store, sql
from tests import store_steps
from tests.reports import as_probe_report

OPENERS = 48  # processes opening one fresh database at the same instant
ROUNDS = 4


def _open_and_add(url: str, barrier: multiprocessing.synchronize.Barrier, host: str) -> str:
    """Open the store at `url` (the first open migrates) and add one report; '' or what went
    wrong. The open is what is under test; the 48 adds that follow queue for the one write lock,
    each for at most sql.BUSY_TIMEOUT_S, which a loaded machine can pass in turn: an add refused
    with "database is locked" is tried again (three times), an open never."""
    barrier.wait(30)
    try:
        store = open_store(url)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        for attempt in range(3):
            try:
                store.add(as_probe_report({"inventory": {"hostname": host}}))
                break
            except StoreError as exc:
                if "database is locked" not in str(exc) or attempt == 2:
                    return f"add: {type(exc).__name__}: {exc}"
    finally:
        store.close()
    return ""


def test_simultaneous_first_opens_of_a_fresh_file_all_succeed(tmp_path: Path) -> None:
    """A race shows up in some rounds only: several fresh files, each opened by 48 processes."""
    ctx = multiprocessing.get_context("fork")  # the test module is imported once, not 48 times
    with ctx.Manager() as manager, ctx.Pool(OPENERS) as pool:
        for round_no in range(ROUNDS):
            path = str(tmp_path / f"fresh-{round_no}.db")
            barrier = manager.Barrier(OPENERS)
            errors = pool.starmap(
                _open_and_add, [(f"sqlite:///{path}", barrier, f"h{i}") for i in range(OPENERS)]
            )
            failed = [e for e in errors if e]
            assert not failed, (
                f"round {round_no}: {len(failed)} of {OPENERS} first opens failed:"
                f" {sorted(set(failed))[:3]}"
            )
            with sqlite3.connect(path) as conn:
                versions = [v for (v,) in conn.execute("SELECT version_num FROM alembic_version")]
                stored = conn.execute("SELECT COUNT(*) FROM probe_reports").fetchone()[0]
            # migrated once: a second run of the steps would have failed its opener (0001's
            # CREATE TABLE has no IF NOT EXISTS), and Alembic keeps one row
            assert versions == [migrate.head()]
            assert stored == OPENERS


def _lock_held(path: str, seconds: float) -> tuple[sqlite3.Connection, threading.Timer]:
    """Another connection holding `path`'s write lock, released `seconds` on by the timer."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(seconds, holder.execute, ("ROLLBACK",))
    release.start()
    return holder, release


def test_an_open_waits_for_a_lock_held_by_another_process(tmp_path: Path) -> None:
    """busy_timeout is in force from the first statement of a connection: an open (PRAGMAs,
    migration) while another connection holds the write lock waits for it, then succeeds."""
    path = str(tmp_path / "b.db")
    open_store(f"sqlite:///{path}").close()
    holder, release = _lock_held(path, 0.5)
    try:
        store = open_store(f"sqlite:///{path}")
        store.close()
    finally:
        release.join()
        holder.close()


def test_an_open_waits_out_another_process_migrating_longer_than_a_write_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's migration of a large file holds the write lock for longer than a
    write waits (BUSY_TIMEOUT_S, made short here): the open still waits for it, and once open
    the store's writes wait BUSY_TIMEOUT_S again, not the migration's wait."""
    monkeypatch.setattr(sql, "BUSY_TIMEOUT_S", 0.2)
    path = str(tmp_path / "m.db")
    open_store(f"sqlite:///{path}").close()
    holder, release = _lock_held(path, 1.0)
    try:
        store = open_store(f"sqlite:///{path}")  # waits about 1 s, five times BUSY_TIMEOUT_S
    finally:
        release.join()
        holder.close()
    # released in 5 s unless the write gave up first (then at once): a write that waited as
    # long as the open would succeed once the lock went
    holder, release = _lock_held(path, 5.0)
    try:
        with pytest.raises(StoreError, match="locked"):
            store.add(as_probe_report({"inventory": {"hostname": "h"}}))
    finally:
        release.cancel()
        release.join()
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
        store.close()


def test_reads_do_not_wait_for_a_writer_or_for_each_other(tmp_path: Path) -> None:
    """Another process holds the write lock (a long transaction): reads still answer at once,
    from their own connections, all of them (the old single locked connection made the k-th
    read wait busy_timeout * k and then fail)."""
    path = str(tmp_path / "r.db")
    store = open_store(f"sqlite:///{path}")
    ids = [store.add(as_probe_report({"inventory": {"hostname": f"h{i}"}})).id for i in range(4)]
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # the write lock, held by someone else
    writer.execute("UPDATE alembic_version SET version_num = 'held'")
    results: list[bool] = []
    lock = threading.Lock()

    def read(report_id: str) -> None:
        found = store.get(report_id) is not None and store.count() == 4
        with lock:
            results.append(found)

    try:
        threads = [threading.Thread(target=read, args=(i,)) for i in ids * 2]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        # every read answered while the lock was still held (it is released below): none
        # waited for the writer, which would have been a failure after busy_timeout

        assert writer.in_transaction
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        store.close()
    assert results == [True] * 8, results


# -- PostgreSQL ------------------------------------------------------------------------------
PG_URL = os.environ.get("ADVISOR_TEST_POSTGRES_URL")


def _need_pg() -> str:
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("ADVISOR_TEST_POSTGRES_URL is not set in CI")
        pytest.skip("no PostgreSQL (set ADVISOR_TEST_POSTGRES_URL; scripts/start-postgres.sh)")
    return PG_URL


def test_postgres_simultaneous_first_opens_migrate_once() -> None:
    import psycopg

    url = _need_pg()
    ctx = multiprocessing.get_context("fork")
    openers = 16  # each holds connections: stay well below max_connections
    with ctx.Manager() as manager, ctx.Pool(openers) as pool:
        for round_no in range(ROUNDS):
            store_steps.drop_all(url)
            barrier = manager.Barrier(openers)
            errors = pool.starmap(_open_and_add, [(url, barrier, f"h{i}") for i in range(openers)])
            failed = [e for e in errors if e]
            assert not failed, f"round {round_no}: {len(failed)} of {openers} failed: {failed[:3]}"
            with psycopg.connect(url) as conn:
                versions = [v for (v,) in conn.execute("SELECT version_num FROM alembic_version")]
                stored = conn.execute("SELECT COUNT(*) FROM probe_reports").fetchone()
            assert versions == [migrate.head()]
            assert stored == (openers,)


def test_postgres_pool_exhaustion_is_a_store_error_and_a_503() -> None:
    """Every pooled connection busy (here: the one, waiting on a table lock someone else holds):
    the next request gets StoreError after the pool's timeout, and the API a 503 problem."""
    import psycopg

    url = _need_pg()
    store = SqlStore(url, pool_size=1, pool_timeout_s=0.5)
    client = TestClient(create_app(Settings(database_url=url), store=store))
    locker = psycopg.connect(url)
    locker.execute("LOCK TABLE probe_reports IN ACCESS EXCLUSIVE MODE")
    blocked = threading.Thread(target=store.count)
    blocked.start()
    try:
        time.sleep(0.3)  # the pool's only connection now waits for the lock
        with pytest.raises(StoreError, match="PostgreSQL"):
            store.count()  # after the pool's 0.5 s timeout, not the lock's wait
        answer = client.get("/v1/probe-reports")
        assert answer.status_code == 503, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["title"] == "Storage unavailable"
    finally:
        locker.rollback()
        locker.close()
        blocked.join(10)
    assert store.count() >= 0  # the connection is back in the pool and works
    store.close()
