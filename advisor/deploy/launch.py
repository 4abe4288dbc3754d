"""From a plan to a launch: the SkyPilot task YAML or the dstack task configuration for one
recommended option (accelerator, count, nodes, cloud, region, spot or not, disk), checked against
the schemas vendored beside this module (advisor/deploy/schemas/, each naming the source file and
commit it was derived from). Pure but for reading the schema files; jsonschema is imported when a
document is validated.
"""

from __future__ import annotations

import json
import math
import textwrap
from importlib import resources
from typing import Any, Literal

from advisor.catalog.importers.skypilot_names import ACCELERATORS, OVERRIDES
from advisor.catalog.models import Accelerator, Purchase
from advisor.catalog.purchase import TERM_HOURS, TERMS, YEAR_HOURS
from advisor.engine.result import Recommendation
from advisor.errors import InputError

Kind = Literal["skypilot", "dstack"]
# What each tool launches on, of the catalog's providers. dstack reads RunPod's secure cloud by
# data centre (EU-RO-1) and names its offers by RunPod's GPU ids (dstackai/gpuhunt
# src/gpuhunt/providers/runpod.py), where the catalog keeps SkyPilot's countries and pod names
# (catalog/instances/runpod.yaml): a dstack task pinned to them would match no offer.
CLOUDS: dict[Kind, frozenset[str]] = {
    "skypilot": frozenset({"aws", "gcp", "azure", "oci", "lambda", "runpod"}),
    "dstack": frozenset({"aws", "gcp", "azure", "oci", "lambda"}),
}
# Disk per node: the catalog has no disk figure for an instance type. Checkpoints and weights:
# twice a node's share of the work's memory, at least 256 GB (ESTIMATED: a starting point to
# edit, not a sized figure).
MIN_DISK_GB = 256
RUN_PLACEHOLDER = "echo 'advisor wrote the resources: put the job command here'"


def skypilot_name(accelerator_id: str, provider: str = "") -> str | None:
    """SkyPilot's name for a catalog accelerator on `provider`: the mapping table the importer
    reads, backwards (advisor/catalog/importers/skypilot_names.py); None where SkyPilot has none
    in it. A provider that names every type its own way (RunPod: "H100-SXM", and "H100" for the
    PCIe card) is read in its own table first."""
    own = OVERRIDES.get((provider, ""), {})
    for table in (own, ACCELERATORS, *OVERRIDES.values()):
        for name, catalog_id in table.items():
            if catalog_id == accelerator_id:
                return name
    return None


# What a launch file cannot say of a commitment the plan was priced on, as comment lines above
# it. A term (a reserved instance, a savings plan, a committed use discount, a reservation) is a
# billing discount that applies to matching usage launched the usual way; a Capacity Block is
# capacity: its instances run only when launched into the block's reservation, bought first.
COMMITMENT_NOTES = {
    **{
        term.value: f"a {TERM_HOURS[term] / YEAR_HOURS:g}-year term: a billing discount on "
        "matching usage; this file launches the usual way and the term applies once bought"
        for term in TERMS
    },
    Purchase.capacity_block.value: "an EC2 Capacity Block: buy the block first and launch into "
    "its capacity reservation; this file names none, so as written it launches on demand",
}


def commitment_comment(rec: Recommendation) -> str:
    """Comment lines for a launch file whose plan was priced on a commitment; '' otherwise."""
    note = COMMITMENT_NOTES.get(rec.purchase or "")
    if note is None:
        return ""
    return "".join(f"# {line}\n" for line in textwrap.wrap(f"priced as {note}", 98))


def disk_gb(rec: Recommendation) -> int:
    memory = rec.sizing.memory_total_gb / max(rec.nodes, 1) if rec.sizing is not None else 0.0
    return max(MIN_DISK_GB, 50 * math.ceil(2 * memory / 50))


def _cloud(rec: Recommendation, kind: Kind) -> str:
    clouds = CLOUDS[kind]
    if rec.instance_type is None or rec.provider not in clouds:
        where = rec.device or rec.provider
        tool = "SkyPilot" if kind == "skypilot" else "dstack"
        raise InputError(
            f"--emit {kind} launches a cloud instance; the chosen option ({where}) is not one "
            f"that {tool} is written for here ({', '.join(sorted(clouds))})",
            field="emit",
        )
    return str(rec.provider)


def skypilot_task(rec: Recommendation, name: str) -> dict[str, Any]:
    """The SkyPilot task for one recommendation: its instance type pinned, in its region."""
    cloud = _cloud(rec, "skypilot")
    resources_: dict[str, Any] = {
        "cloud": cloud,
        "region": rec.region,
        "instance_type": rec.instance_type,
        "use_spot": rec.purchase == "spot",
        "disk_size": disk_gb(rec),
    }
    per_node = rec.gpu_count // max(rec.nodes, 1)
    accel = skypilot_name(rec.accelerator, cloud)
    if accel is not None and per_node:
        resources_["accelerators"] = f"{accel}:{per_node}"
    task: dict[str, Any] = {"name": name, "resources": resources_}
    if rec.nodes > 1:
        task["num_nodes"] = rec.nodes
    task["run"] = RUN_PLACEHOLDER
    return task


def dstack_task(rec: Recommendation, name: str, hardware: Accelerator | None) -> dict[str, Any]:
    """The dstack task configuration for one recommendation: backend, region, instance type and
    spot policy pinned to it."""
    cloud = _cloud(rec, "dstack")
    task: dict[str, Any] = {"type": "task", "name": name}
    if rec.nodes > 1:
        task["nodes"] = rec.nodes
    task["commands"] = [RUN_PLACEHOLDER]
    spec: dict[str, Any] = {"disk": {"size": f"{disk_gb(rec)}GB.."}}
    per_node = rec.gpu_count // max(rec.nodes, 1)
    accel = skypilot_name(rec.accelerator)
    if accel is not None and per_node and hardware is not None:
        gpu: dict[str, Any] = {"name": accel.split("-")[0], "count": per_node}
        if hardware.memory_gb:
            gpu["memory"] = f"{math.floor(hardware.memory_gb)}GB"
        spec = {"gpu": gpu, **spec}
    task["resources"] = spec
    task["backends"] = [cloud]
    task["regions"] = [rec.region]
    task["instance_types"] = [rec.instance_type]
    task["spot_policy"] = "spot" if rec.purchase == "spot" else "on-demand"
    return task


def problems(document: dict[str, Any], kind: Kind) -> list[str]:
    """Every way `document` breaks the vendored schema of `kind`, as 'path: message'."""
    import jsonschema

    text = resources.files("advisor.deploy").joinpath(f"schemas/{kind}-task.schema.json")
    schema = json.loads(text.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(top)'}: {error.message}"
        for error in sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    ]
