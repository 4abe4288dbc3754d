"""Small, hand-made catalog entries for tests that must not depend on the shipped data."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml

from advisor.catalog import Catalog
from advisor.catalog.loading import load_catalog

TODAY = dt.date(2026, 12, 5)  # the latest date shipped snapshot rows were read (catalog/README.md)
AS_OF = "2026-11-01"


def acc(id: str, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": id,
        "name": id.upper(),
        "vendor": "nvidia",
        "form_factor": "datacenter",
        "generation": "hopper",
        "memory_gb": 80,
        "memory_bandwidth_gbps": 3350,
        "peak_tflops": {"fp32": 67, "bf16": 989, "fp16": 989, "fp8": 1979},
        "tdp_w": 700,
        "interconnect_gb_s": 900,
        "source": "test",
    }
    base.update(kw)
    return base


def price(
    region: str, hourly: float, purchase: str = "on_demand", as_of: str = AS_OF
) -> dict[str, Any]:
    return {
        "region": region,
        "purchase": purchase,
        "hourly_usd": hourly,
        "as_of": as_of,
        "source": "test",
    }


def inst(
    id: str, accelerator: str | None, gpu_count: int, prices: list[dict[str, Any]], **kw: Any
) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": id,
        "provider": "aws",
        "accelerator": accelerator,
        "gpu_count": gpu_count,
        "vcpus": 8,
        "memory_gib": 64,
        "network_gbps": 100,
        "prices": prices,
        "source": "test",
    }
    if accelerator is None:
        base["cpu"] = "cpu-x"
    base.update(kw)
    return base


WORKLOADS: list[dict[str, Any]] = [
    {
        "id": "large_scale_training",
        "description": "t",
        "job": "train",
        "form_factors": ["datacenter"],
        "scale_out": True,
        "min_multi_node_network_gbps": 400,
        "key_precision": "bf16",
        "rationale": "t",
        "default_gpu_count": 8,
        "prefer_gpu_link": ["nvswitch"],
        "preference_penalty": 0.25,
    },
    {
        "id": "fine_tuning",
        "description": "t",
        "job": "fine_tune",
        "form_factors": ["datacenter"],
        "rationale": "t",
    },
    {
        "id": "high_throughput_inference",
        "description": "t",
        "job": "serve",
        "form_factors": ["datacenter"],
        "key_precision": "fp8",
        "default_objective": "cheapest",
        "rationale": "t",
    },
    {
        "id": "edge_inference",
        "description": "t",
        "job": "serve",
        "form_factors": ["edge"],
        "key_precision": "int8",
        "default_objective": "performance",
        "rationale": "t",
    },
    {
        "id": "batch_processing",
        "description": "t",
        "job": "batch",
        "form_factors": ["cpu", "datacenter"],
        "scale_out": True,
        "prefer_form_factor": "cpu",
        "preference_penalty": 0.5,
        "rationale": "t",
    },
]


def mini_catalog_data() -> dict[str, list[dict[str, Any]]]:
    """A tiny catalog whose right answers can be worked out by hand."""
    return {
        "accelerators": [
            acc("big", memory_gb=80, tdp_w=700, interconnect_gb_s=900),
            acc(
                "small",
                memory_gb=24,
                tdp_w=72,
                interconnect_gb_s=0,
                peak_tflops={"fp32": 30, "bf16": 121, "fp16": 121, "fp8": 242},
            ),
            acc(
                "cpu-x",
                form_factor="cpu",
                memory_gb=0,
                memory_bandwidth_gbps=300,
                tdp_w=300,
                interconnect_gb_s=0,
                peak_tflops={},
            ),
            acc(
                "edge-a",
                form_factor="edge",
                memory_gb=64,
                memory_bandwidth_gbps=200,
                tdp_w=60,
                interconnect_gb_s=0,
                peak_tflops={"int8": 137},
                power_modes=[
                    {"name": "15W", "power_w": 15},
                    {"name": "60W", "power_w": 60, "int8_tops": 137},
                ],
            ),
            acc(
                "edge-b",
                form_factor="edge",
                memory_gb=8,
                memory_bandwidth_gbps=100,
                tdp_w=25,
                interconnect_gb_s=0,
                peak_tflops={"int8": 33},
                power_modes=[
                    {"name": "7W", "power_w": 7, "int8_tops": 10},
                    {"name": "25W", "power_w": 25, "int8_tops": 40},
                ],
            ),
        ],
        "instance_types": [
            inst(
                "big8",
                "big",
                8,
                [
                    price("us-east-1", 98.0),
                    price("eu-west-1", 110.0),
                    price("us-east-1", 40.0, "spot"),
                ],
                gpu_link="nvswitch",
                interconnect_gb_s=900,
                network_gbps=3200,
                gpu_memory_total_gb=640,
            ),
            inst(
                "big8-pcie", "big", 8, [price("us-east-1", 80.0)], gpu_link="pcie", network_gbps=100
            ),
            inst("big1", "big", 1, [price("us-east-1", 12.0)]),
            inst("small1", "small", 1, [price("us-east-1", 0.8), price("eu-west-1", 0.9)]),
            inst("small4", "small", 4, [price("us-east-1", 4.6)], gpu_link="pcie"),
            inst(
                "cpu4", None, 0, [price("us-east-1", 0.2), price("eu-west-1", 0.22)], memory_gib=16
            ),
            inst("cpu64", None, 0, [price("us-east-1", 3.0)], memory_gib=512, provider="gcp"),
        ],
        "workloads": WORKLOADS,
    }


def write_catalog(directory: Path, data: dict[str, Any], name: str = "catalog.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(yaml.safe_dump(data, sort_keys=False))
    return directory


def load_mini(tmp_path: Path, mutate: Any = None) -> Catalog:
    data = mini_catalog_data()
    if mutate is not None:
        mutate(data)
    write_catalog(tmp_path / "mini", data)
    return load_catalog(tmp_path / "mini", replace=True, today=TODAY, max_age_days=365)
