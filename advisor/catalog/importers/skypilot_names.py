"""The mapping table of the SkyPilot importer, as data.

SkyPilot's catalog names accelerators by its own short names (`AcceleratorName` column of
skypilot-org/skypilot-catalog catalogs/v*/<cloud>/vms.csv; the list of names is
catalogs/v8/common/accelerators.csv). This table says which catalog accelerator id each name is.
A name is never guessed: a name listed in NOT_IN_CATALOG is known to exist but has no catalog id
yet (its rows are skipped and reported in the summary); a name in neither table stops the import
(exit 2, naming the file, line and column) so that a new accelerator is added here on purpose.
An id that the loaded catalog lacks (e.g. one the hardware helper has not added yet) is reported,
never written.
"""

from __future__ import annotations

# SkyPilot AcceleratorName -> catalog accelerator id, for every provider unless overridden below.
# Sources: the part each provider page names for the instance families priced with that name
# (AWS https://aws.amazon.com/ec2/instance-types/ (p4d: A100 40GB SXM; p4de: A100 80GB;
# p5: H100 SXM; p5e/p5en: H200; g4dn: T4; g5: A10G; g6: L4; g6e: L40S); GCP
# https://cloud.google.com/compute/docs/gpus (A100 40GB / 80GB SXM, H100 80GB, H200, L4, T4);
# Azure https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ (ND A100 v4:
# A100 SXM; ND H100 v5: H100 SXM; NCasT4 v3: T4; NV A10 v5: A10)).
ACCELERATORS: dict[str, str] = {
    "A100": "a100-40gb-sxm",
    "A100-80GB": "a100-80gb-sxm",
    "H100": "h100-sxm",
    "H100-MEGA": "h100-sxm",  # GCP a3-megagpu: H100 SXM with more NICs (same GPU)
    "H200": "h200-sxm",
    "L4": "l4",
    "L40S": "l40s",
    "A10G": "a10g",
    "A10": "a10",
    "T4": "t4",
    "B200": "b200",  # catalog id added by the hardware helper; reported until it exists
    "MI300X": "mi300x",
    # 2026 hardware (AWS p6-b300: B300 SXM, https://aws.amazon.com/ec2/instance-types/p6/; OCI
    # BM.GPU.GB200.4 / GB300.4 / B300.8 / MI355X.8, https://docs.oracle.com/iaas/Content/Compute/
    # References/computeshapes.htm: one GPU of a GB200 / GB300 superchip, B300, MI355X)
    "B300": "b300",
    "GB200": "gb200",
    "GB300": "gb300",
    "MI325X": "mi325x",
    "MI355X": "mi355x",
    # AWS Neuron chips (AWS Neuron documentation: trn1 = Trainium, trn2 = Trainium2, inf2 =
    # Inferentia2; the AcceleratorCount of their rows is the chip count)
    "Trainium": "trainium1",
    "Trainium2": "trainium2",
    "Inferentia2": "inferentia2",
}

# (provider, instance-id prefix) -> {name: id}: where one SkyPilot name is a different part.
# Azure NC A100 v4 is the A100 80GB PCIe; NC H100 v5 is the H100 NVL (Azure NC H100 v5 page,
# https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nch100v5-series).
OVERRIDES: dict[tuple[str, str], dict[str, str]] = {
    ("azure", "Standard_NC24ads_A100_v4"): {"A100-80GB": "a100-80gb-pcie"},
    ("azure", "Standard_NC48ads_A100_v4"): {"A100-80GB": "a100-80gb-pcie"},
    ("azure", "Standard_NC96ads_A100_v4"): {"A100-80GB": "a100-80gb-pcie"},
    ("azure", "Standard_NC40ads_H100_v5"): {"H100": "h100-nvl"},
    ("azure", "Standard_NC80adis_H100_v5"): {"H100": "h100-nvl"},
    # RunPod (every type: prefix ""): its fetcher names the PCIe parts "A100-80GB" and "H100"
    # (renaming A100-PCIe and H100-PCIe: skypilot-org/skypilot sky/catalog/data_fetchers/
    # fetch_runpod.py GPU_NAME_OVERRIDES) and the SXM parts "A100-80GB-SXM", "H100-SXM",
    # "H200-SXM" (RunPod's display names with hyphens).
    ("runpod", ""): {
        "A100-80GB": "a100-80gb-pcie",
        "H100": "h100-pcie",
        "A100-80GB-SXM": "a100-80gb-sxm",
        "H100-SXM": "h100-sxm",
        "H200-SXM": "h200-sxm",
        "H100-NVL": "h100-nvl",
    },
}

# Names SkyPilot uses for parts the catalog has no id for (yet): rows skipped, reported.
NOT_IN_CATALOG: frozenset[str] = frozenset(
    {
        "K80",
        "M60",
        "P4",
        "P100",
        "V100",
        "V100-32GB",
        "T4g",
        "A10G-24GB",
        "Radeon Pro V520",
        "Gaudi HL-205",
        "Inferentia",
        "RTXPRO6000",  # OCI BM.GPU.RTXPRO.8; no catalog accelerator yet
        "A100-40GB-PCIE",
        "H100-80GB-PCIE",
        "MI25",
        "P40",
        "A10-FRACTIONAL",
        # RunPod (catalogs/v8/runpod/vms.csv) parts the catalog has no id for
        "A30",
        "A40",
        "L40",
        "V100-SXM2",
        "V100-SXM2-32GB",
    }
)

# Name prefixes of the same kind: GCP TPU slices (tpu-v4-8, tpu-v6e-16, ...) are priced as
# accelerator rows; those of GCP_TPU_SLICES are imported, the others skipped and reported.
# RunPod's workstation and consumer cards (RTX4090, RTXA6000, RTXPRO6000, ...) likewise.
NOT_IN_CATALOG_PREFIXES: tuple[str, ...] = ("tpu-", "RTX")

# GCP TPU slices imported as instance types (the catalog id is SkyPilot's name, e.g. tpu-v6e-8):
# name prefix -> (catalog accelerator id, TensorCores per chip). The number after the prefix
# counts TensorCores for v5p (v5p-8 = 4 chips, https://cloud.google.com/tpu/docs/v5p: "v5p-32
# specifies a v5p TPU slice with 32 TensorCores (16 chips)") and chips for v5e/v6e, which have
# one TensorCore per chip (https://cloud.google.com/tpu/docs/v5e, .../v6e). A slice's price is
# its accelerator row alone: the TPU VM's host is included in it (SkyPilot prices TPU VMs so).
GCP_TPU_SLICES: dict[str, tuple[str, int]] = {
    "tpu-v5litepod-": ("tpu-v5e", 1),
    "tpu-v5p-": ("tpu-v5p", 2),
    "tpu-v6e-": ("tpu-v6e", 1),
}

# GCP prices the GPUs of accelerator-optimised machines by separate GPU rows (InstanceType empty,
# AcceleratorName/AcceleratorCount set): machine-id prefix -> the GPU row's name. The GPU count
# is the machine id's "-<N>g" suffix (GCP naming, https://cloud.google.com/compute/docs/
# accelerator-optimized-machines), or GCP_GPU_COUNTS where the name does not carry it.
GCP_MACHINE_GPUS: dict[str, str] = {
    "a2-highgpu-": "A100",
    "a2-megagpu-": "A100",
    "a2-ultragpu-": "A100-80GB",
    "a3-highgpu-": "H100",
    "a3-edgegpu-": "H100",
    "a3-megagpu-": "H100-MEGA",
    "a3-ultragpu-": "H200",
    "a4-highgpu-": "B200",
    "g2-standard-": "L4",
}
# G2 machine types and their L4 count (https://cloud.google.com/compute/docs/gpus#l4-gpus).
GCP_GPU_COUNTS: dict[str, int] = {
    "g2-standard-4": 1,
    "g2-standard-8": 1,
    "g2-standard-12": 1,
    "g2-standard-16": 1,
    "g2-standard-32": 1,
    "g2-standard-24": 2,
    "g2-standard-48": 4,
    "g2-standard-96": 8,
}
# Catalog ids that are a GCP VM with GPUs attached (N1 + T4): id -> (VM row, GPU name, count).
GCP_ATTACHED: dict[str, tuple[str, str, int]] = {
    "n1-standard-8-t4x1": ("n1-standard-8", "T4", 1),
    "n1-standard-32-t4x4": ("n1-standard-32", "T4", 4),
}

# Instance families imported as NEW types when the source prices them.
# Existing catalog types of the provider are always refreshed.
FAMILIES: dict[str, tuple[str, ...]] = {
    "aws": (
        "p4d.",
        "p4de.",
        "p5.",
        "p5e.",
        "p5en.",
        "p6-b200.",
        "p6-b300.",
        "g4dn.",
        "g5.",
        "g6.",
        "g6e.",
        "trn1.",
        "trn1n.",
        "trn2.",
        "inf2.",
    ),
    "gcp": ("a2-highgpu-", "a2-ultragpu-", "a2-megagpu-", "a3-", "a4-", "g2-standard-"),
    "azure": ("Standard_NC", "Standard_ND", "Standard_NV"),
    # OCI bare-metal GPU shapes of the hardware the catalog has (catalogs/v8/oci/vms.csv)
    "oci": (
        "BM.GPU.B200.",
        "BM.GPU.B300.",
        "BM.GPU.GB200.",
        "BM.GPU.GB300.",
        "BM.GPU.H100.",
        "BM.GPU.H200.",
        "BM.GPU.MI300X.",
        "BM.GPU.MI355X.",
    ),
    # Lambda on-demand GPU instances of the hardware the catalog has (catalogs/v8/lambda/vms.csv:
    # gpu_<N>x_<part>, e.g. gpu_8x_h100_sxm5 = 8 H100 SXM5, gpu_8x_b200_sxm6 = 8 B200)
    "lambda": ("gpu_1x_b200", "gpu_2x_b200", "gpu_8x_b200", "gpu_4x_h100_sxm", "gpu_8x_h100_sxm"),
    # RunPod secure-cloud pods of one and eight GPUs of the hardware the catalog has
    # (catalogs/v8/runpod/vms.csv: <N>x_<name>_SECURE); B300 in one- and two-GPU pods only
    "runpod": (
        *(
            f"{n}x_{name}_SECURE"
            for name in ("B200", "H100-SXM", "H200-SXM", "MI300X")
            for n in (1, 8)
        ),
        "1x_B300_SECURE",
    ),
}

# Providers whose spot rates are not imported, and why: a spot price is planned with its
# provider's interruption figure (catalog/spot.yaml, advisor/perf/spot.py), and these publish
# none, so their spot prices would be planned as if never interrupted.
SPOT_NOT_IMPORTED: dict[str, str] = {
    "runpod": "RunPod publishes no interruption rate for its interruptible pods",
}

# AWS availability-zone ids of the region proper (use1-az6); Local/Wavelength Zones
# (use1-atl2-az1, ...) are priced apart and left out of the region's spot median.
AWS_REGION_ZONE_PATTERN = r"^[a-z]+[0-9]+-az[0-9]+$"
