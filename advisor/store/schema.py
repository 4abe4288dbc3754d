"""The store's tables as SQLAlchemy Core sees them at the newest migration
(advisor/store/migrations/versions/): the queries of advisor/store/sql.py are built from them.
The DDL itself lives in the migrations only, so that a database created today and one upgraded
from an older version hold the same schema."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Double, Integer, MetaData, Table, Text

metadata = MetaData()

probe_reports = Table(
    "probe_reports",
    metadata,
    Column("id", Text, primary_key=True),
    Column("received_at", Text, nullable=False),  # advisor.store.sql.format_time: text order
    Column("host", Text, nullable=False),
    Column("accelerator", Text),
    Column("verdict", Text, nullable=False),
    Column("body", Text, nullable=False),  # advisor.store.base.canonical_json
    Column("idempotency_key", Text, unique=True),
    # Which write token stored the report (advisor.store.base.token_id, never the token); None
    # without one. Kept with each check row before migration 0011.
    Column("token_id", Text),
)

utilisation_reports = Table(
    "utilisation_reports",
    metadata,
    Column("id", Text, primary_key=True),
    Column("received_at", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("idempotency_key", Text, unique=True),
    # What a listing names, kept beside the body (advisor.store.base.utilisation_figures;
    # migration 0012 filled them in for the reports stored before it)
    Column("instance_type", Text),
    Column("gpu_count", Integer, nullable=False, server_default="0"),
    Column("findings", Text, nullable=False, server_default="{}"),  # JSON, keys sorted
)

ops_reports = Table(
    "ops_reports",
    metadata,
    Column("id", Text, primary_key=True),
    Column("received_at", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("accelerator", Text),
    Column("body", Text, nullable=False),
    Column("idempotency_key", Text, unique=True),
)

# -- the fleet summary's aggregates (advisor/store/aggregates.py; migration 0008) -------------
# accelerator: "" for runs that matched none (a key column is never NULL)
fleet_verdicts = Table(
    "fleet_verdicts",
    metadata,
    Column("accelerator", Text, primary_key=True),
    Column("verdict", Text, primary_key=True),
    Column("reports", BigInteger, nullable=False),
)
fleet_check_statuses = Table(
    "fleet_check_statuses",
    metadata,
    Column("accelerator", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("status", Text, primary_key=True),
    Column("runs", BigInteger, nullable=False),
)
fleet_ratios = Table(
    "fleet_ratios",
    metadata,
    Column("accelerator", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("bucket", Integer, primary_key=True),
    Column("n", BigInteger, nullable=False),
    Column("lo", Double, nullable=False),
    Column("hi", Double, nullable=False),
)
# The voted checks' ratios per host (advisor.perf.calibration.VOTED_CHECKS; migration 0009)
fleet_votes = Table(
    "fleet_votes",
    metadata,
    Column("accelerator", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("host", Text, primary_key=True),
    Column("bucket", Integer, primary_key=True),
    Column("n", BigInteger, nullable=False),
    Column("lo", Double, nullable=False),
    Column("hi", Double, nullable=False),
)
fleet_vote_tokens = Table(
    "fleet_vote_tokens",
    metadata,
    Column("accelerator", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("host", Text, primary_key=True),
    Column("token_id", Text, primary_key=True),
)
# -- the review's aggregates (advisor/fleet/digest.py's FleetDigest; migration 0010) ----------
# Each (accelerator, host, check)'s runs and failures (the summary's hosts and failing hosts,
# the review's outliers; it replaced 0008's fleet_hosts), and its plausible ratios at a coarser
# step (advisor.store.aggregates.HOST_RATIO_STEP) for the host's median
fleet_host_checks = Table(
    "fleet_host_checks",
    metadata,
    Column("accelerator", Text, primary_key=True),
    Column("host", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("runs", BigInteger, nullable=False),
    Column("failed", BigInteger, nullable=False),
)
fleet_host_ratios = Table(
    "fleet_host_ratios",
    metadata,
    Column("accelerator", Text, primary_key=True),
    Column("host", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("bucket", Integer, primary_key=True),
    Column("n", BigInteger, nullable=False),
    Column("lo", Double, nullable=False),
    Column("hi", Double, nullable=False),
)
# The unit of each (accelerator, check), from the first run stored with a plausible ratio
fleet_check_units = Table(
    "fleet_check_units",
    metadata,
    Column("accelerator", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("unit", Text),
)
# Each host's latest report (created_at "" where a report has none) and its earliest created_at
fleet_latest_hosts = Table(
    "fleet_latest_hosts",
    metadata,
    Column("host", Text, primary_key=True),
    Column("created_at", Text, nullable=False),
    Column("first_at", Text, nullable=False),
    Column("verdict", Text, nullable=False),
    Column("driver_version", Text),
    Column("failed_ranks", Integer, nullable=False),
    Column("gpus", Text, nullable=False),  # JSON: [[key, index, name, verdict], ...]
)
# Each measured GPU's latest report
fleet_latest_gpus = Table(
    "fleet_latest_gpus",
    metadata,
    Column("gpu_key", Text, primary_key=True),
    Column("host", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("matched", Text),
    Column("gpu", Integer),
    Column("name", Text),
    Column("verdict", Text, nullable=False),
)
AGGREGATES = (
    fleet_verdicts,
    fleet_check_statuses,
    fleet_ratios,
    fleet_votes,
    fleet_vote_tokens,
    fleet_host_checks,
    fleet_host_ratios,
    fleet_check_units,
    fleet_latest_hosts,
    fleet_latest_gpus,
)
