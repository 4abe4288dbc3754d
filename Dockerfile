# syntax=docker/dockerfile:1
#
# Two images from one file:
#   docker build --target service -t advisor:service .   # the HTTP API, no torch (~200 MB)
#   docker build --target probe   -t advisor:probe   .   # `advisor probe` on a CUDA PyTorch base
#
#   docker run -p 8080:8080 -v advisor-data:/data -e ADVISOR_API_TOKENS=... advisor:service
#   docker run --rm --gpus all advisor:probe --full --expect h200-sxm --json
#
# Runtime dependency versions are constrained to requirements-dev.txt: the set the tests ran with.

# ---------------------------------------------------------------------------------------------
# builder: the wheel (catalog/ is force-included as advisor/_catalog_data) and the service's venv
# ---------------------------------------------------------------------------------------------
FROM python:3.12.11-slim-bookworm AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
COPY pyproject.toml README.md requirements-dev.txt ./
COPY advisor ./advisor
COPY probes ./probes
COPY catalog ./catalog

# One wheel for both images; the service's virtual environment is built here and copied whole,
# so the final image carries no build tooling. pip refuses extras in a constraints file, so
# "psycopg[binary]==X" becomes "psycopg==X". `set --` expands the wheel's name (its version
# comes from pyproject.toml) without ls, and keeps the [postgres] extra out of the glob.
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && sed -E 's/\[[^]]*\]//' requirements-dev.txt > /wheels/constraints.txt \
    && python -m venv /opt/venv \
    && set -- /wheels/advisor-*.whl \
    && /opt/venv/bin/pip install --no-cache-dir -c /wheels/constraints.txt "$1[postgres]"

# ---------------------------------------------------------------------------------------------
# service: `advisor serve` on :8080, SQLite in /data by default (ADVISOR_DATABASE_URL for
# PostgreSQL: postgresql://user:pass@host/db), non-root, no torch.
# ---------------------------------------------------------------------------------------------
FROM python:3.12.11-slim-bookworm AS service

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    ADVISOR_DATABASE_URL=sqlite:////data/advisor.db

RUN groupadd --system --gid 10001 advisor \
    && useradd --system --uid 10001 --gid advisor --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin advisor \
    && mkdir -p /data \
    && chown advisor:advisor /data

COPY --from=builder /opt/venv /opt/venv

WORKDIR /data
# Numeric, so that runtimes enforcing runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8080

# Liveness only (/readyz also checks the database). Python's stdlib: slim images have no curl.
# urlopen raises on a refused connection, a timeout or a non-2xx status: exit 1, "unhealthy".
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]

# Exec form: advisor is PID 1 and gets SIGTERM from `docker stop` (graceful shutdown, 5 s).
# Other subcommands work too: `docker run advisor:service recommend --workload fine_tuning`.
ENTRYPOINT ["advisor"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]

# ---------------------------------------------------------------------------------------------
# probe: torch (CUDA 12.8, needs an NVIDIA driver >= 570) comes from the base image; only the
# package and the probe extra's NVML bindings are added. Run with --gpus all (or a device).
# The per-GPU lock lives in ADVISOR_PROBE_LOCK_DIR (default /tmp): mount one shared directory
# there to keep probes in several containers off the same GPU at once.
# ---------------------------------------------------------------------------------------------
FROM pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime AS probe

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

COPY --from=builder /wheels /tmp/wheels

# A venv over the base's site-packages: torch is seen from there, and a dependency that needs a
# newer version than conda installed lands in the venv instead of making pip uninstall a conda
# package (which lacks pip's RECORD file and would fail the build). nvidia-ml-py's version comes
# from the constraints file (its torch pin is inert: nothing installed here asks for torch). The
# import check fails the build if the base's torch went missing or the package cannot load.
RUN python -m venv --system-site-packages /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir -c /tmp/wheels/constraints.txt \
        /tmp/wheels/advisor-*.whl nvidia-ml-py \
    && rm -rf /tmp/wheels \
    && /opt/venv/bin/python -c "import torch, pynvml, advisor, probes"

ENV PATH=/opt/venv/bin:$PATH
WORKDIR /workspace
ENTRYPOINT ["advisor", "probe"]
