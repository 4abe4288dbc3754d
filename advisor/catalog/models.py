"""Catalog data models: everything read from catalog/*.yaml is validated by these.

Every model forbids unknown fields so that a typo fails loudly at load time (the loader turns
pydantic's errors into messages naming the file, the entry and the field, with a "did you mean").
Units are part of the field names.
"""

# No `from __future__ import annotations`: pydantic would evaluate each field's annotation from
# its text (an eval per field) when the class is made, on the start-up of every command that
# loads the catalog; written as objects, they are read as they are (about 2 ms of `advisor
# recommend`, benchmarks/bench_startup.py).

import datetime as dt
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

Id = Annotated[str, Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")]
NonNeg = Annotated[float, Field(ge=0)]
Pos = Annotated[float, Field(gt=0)]


class Strict(BaseModel):
    # defer_build: a command answered from the catalog cache never validates catalog entries, so
    # their validators are built on first use only (a cold load builds them as before).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class FormFactor(StrEnum):
    datacenter = "datacenter"
    workstation = "workstation"
    edge = "edge"
    cpu = "cpu"


class Purchase(StrEnum):
    """How a price is bought (advisor/catalog/purchase.py says what each commits to)."""

    on_demand = "on_demand"
    spot = "spot"
    reserved_1y = "reserved_1y"  # a 1-year reservation / commitment, owed every hour of the term
    reserved_3y = "reserved_3y"  # the same for 3 years
    capacity_block = "capacity_block"  # AWS EC2 Capacity Blocks for ML: a fixed window, up front
    reserved = "reserved"  # requests only: either reserved term (a price states its term)


class GpuLink(StrEnum):
    """How the GPUs inside one instance talk to each other."""

    nvswitch = "nvswitch"  # all-to-all NVLink through NVSwitch
    nvlink = "nvlink"  # NVLink bridges / point-to-point
    infinity_fabric = "infinity_fabric"
    pcie = "pcie"  # no GPU-to-GPU fabric: traffic crosses PCIe
    none = "none"  # one GPU, or no GPU
    neuronlink = "neuronlink"  # AWS NeuronLink chip-to-chip links (Trainium / Inferentia2)
    ici = "ici"  # Google TPU inter-chip interconnect (torus)


# What a job asks of an accelerator, and the software stack a job runs on it with.
Job = Literal["train", "fine_tune", "serve", "batch"]
SoftwareStack = Literal["cuda", "rocm", "neuron", "xla", "edgetpu", "hailort", "cpu"]
# What porting a CUDA-trained team faces on each other stack (recommendation reasons say it).
PORTING: dict[str, str] = {
    "rocm": "runs PyTorch on ROCm: CUDA-only extensions (custom kernels, some quantisation "
    "libraries) need HIP builds",
    "neuron": "runs through the AWS Neuron SDK (torch-neuronx, NxD): models are compiled for "
    "NeuronCores and CUDA kernels do not carry over",
    "xla": "runs through XLA (JAX or PyTorch/XLA): CUDA-only code (custom kernels, "
    "bitsandbytes for QLoRA) needs porting",
    "edgetpu": "runs int8 models compiled for the Edge TPU only",
    "hailort": "runs models compiled with the Hailo Dataflow Compiler only",
}


class Generation(StrEnum):
    """The accelerator's architecture generation: calibrated efficiencies are keyed by it."""

    volta = "volta"  # NVIDIA V100
    turing = "turing"  # NVIDIA T4
    ampere = "ampere"  # NVIDIA A100, A10, A10G, Jetson Orin
    ada = "ada"  # NVIDIA L4, L40S
    hopper = "hopper"  # NVIDIA H100, H200
    blackwell = "blackwell"  # NVIDIA B200, GB200
    cdna2 = "cdna2"  # AMD MI250
    cdna3 = "cdna3"  # AMD MI300X, MI325X
    cdna4 = "cdna4"  # AMD MI350X, MI355X
    tpu = "tpu"  # Google Cloud TPU
    trainium = "trainium"  # AWS Trainium / Inferentia
    edge_npu = "edge_npu"  # fixed-function int8 edge accelerators (Coral Edge TPU, Hailo)
    cpu = "cpu"  # CPU classes


PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")


class PeakTflops(Strict):
    """Dense (never 2:4-sparse) peak rates in TFLOP/s; int8 in TOPS.

    Absent = the part has no matrix/tensor-unit rate at that precision (T4: no bf16; A100: no
    fp8): advisor/perf/precision.py reads this as the precision being unsupported.
    """

    fp64: NonNeg | None = None
    fp32: NonNeg | None = None
    tf32: NonNeg | None = None
    bf16: NonNeg | None = None
    fp16: NonNeg | None = None
    fp8: NonNeg | None = None
    fp4: NonNeg | None = None  # Blackwell's NVFP4 tensor-core rate
    int8: NonNeg | None = None

    def get(self, precision: str) -> float | None:
        value: float | None = getattr(self, precision)
        return value


class PowerMode(Strict):
    """An edge device's selectable power envelope (e.g. Jetson nvpmodel modes)."""

    name: Annotated[str, Field(min_length=1)]
    power_w: Pos
    int8_tops: NonNeg | None = (
        None  # dense-equivalent as published for this mode; None if unpublished
    )


class EdgePurchase(Strict):
    """What buying one edge device costs: the list price of the module or board as sold."""

    list_price_usd: Annotated[float, Field(gt=0, le=100_000)]
    item: Annotated[str, Field(min_length=1)]  # what the price buys (module, M.2 card, kit)
    as_of: dt.date
    estimated: bool = False  # True: not a vendor list price (see source)
    source: Annotated[str, Field(min_length=1)]


class EdgeHost(Strict):
    """The computer an edge accelerator cannot run without (an M.2 or USB module is a
    co-processor: a host runs the application and feeds it): its power counts with the device's."""

    name: Annotated[str, Field(min_length=1)]  # e.g. "Raspberry Pi 5"
    power_w: Annotated[float, Field(gt=0, le=1_000)]  # under load, at the wall
    estimated: bool = False  # True: not a vendor figure (see source)
    source: Annotated[str, Field(min_length=1)]


class NcclBusBandwidth(Strict):
    """The all-reduce bus bandwidth a vendor expects a healthy node to reach (its health check's
    pass threshold), in GB/s as nccl-tests reports busbw."""

    busbw_gb_s: Annotated[float, Field(gt=0, le=10_000)]
    gpus: Annotated[int, Field(ge=2, le=64)]  # GPUs in the all-reduce (the whole node)
    message_size: Annotated[str, Field(min_length=1)]  # as the check states it, e.g. "16G"
    source: Annotated[str, Field(min_length=1)]


class PcieLink(Strict):
    gen: Annotated[int, Field(ge=1, le=7)]
    width: Literal[1, 2, 4, 8, 16]


class Accelerator(Strict):
    id: Id
    name: Annotated[str, Field(min_length=1)]
    vendor: Annotated[str, Field(min_length=1)]
    form_factor: FormFactor
    generation: Generation
    # Upper bounds catch wrong units (MB for GB, W for kW, cents for dollars) at load time.
    # None: the device has no memory of its own for the model (an edge NPU that works from the
    # host's memory); shown as "host memory", never 0. Only edge devices may leave it null.
    memory_gb: Annotated[float | None, Field(ge=0, le=4096)]
    memory_bandwidth_gbps: Annotated[float, Field(ge=0, le=100_000)]
    peak_tflops: PeakTflops = Field(default_factory=PeakTflops)  # built on first use, not at import
    tdp_w: Annotated[float, Field(gt=0, le=5_000)]
    interconnect_gb_s: Annotated[float, Field(ge=0, le=10_000)] = 0
    pcie: PcieLink | None = None
    # Names the device reports through NVML / the driver, used by the probe to match hardware.
    nvml_names: tuple[str, ...] = ()
    power_modes: tuple[PowerMode, ...] = ()
    # CPU classes: cores and hardware threads of one socket, for prorating a VM's share of the
    # socket's TDP (advisor/catalog/power.py). None: not stated (a VM is charged the whole socket).
    socket_cores: Annotated[int | None, Field(gt=0, le=1024)] = None
    socket_threads: Annotated[int | None, Field(gt=0, le=2048)] = None
    notes: str | None = None
    source: Annotated[str, Field(min_length=1)]
    # Figures not taken from a vendor datasheet (field names, e.g. "tdp_w"): each is an estimate
    # whose basis the notes give.
    estimated_fields: tuple[str, ...] = ()
    # A datacenter accelerator with no instance type in the catalog says why (checked at load).
    no_instance_reason: str | None = None
    # Edge devices: what one unit costs to buy (the cost-per-year objective reads it).
    purchase: EdgePurchase | None = None
    # Edge co-processors (M.2 / USB modules): the host they need, whose watts count with theirs.
    host: EdgeHost | None = None
    # The jobs it can do (train, fine_tune, serve; batch is any compute) and its software stack.
    jobs: tuple[Job, ...] = ("train", "fine_tune", "serve", "batch")
    software: SoftwareStack = "cuda"

    @property
    def device_memory_gb(self) -> float:
        """Memory on the device; 0 for an edge device that works from host memory (memory_gb is
        null). Non-edge accelerators always state memory_gb (validated)."""
        return self.memory_gb or 0.0

    @property
    def memory_text(self) -> str:
        """How the device's memory is shown: "8 GB", or "host memory" when it has none."""
        return "host memory" if self.memory_gb is None else f"{self.memory_gb:g} GB"

    @model_validator(mode="after")
    def _power_modes_within_tdp(self) -> Self:
        if self.memory_gb is None and self.form_factor != FormFactor.edge:
            raise ValueError("memory_gb may be null (host memory) only on an edge device")
        unknown = {
            f for f in self.estimated_fields if f.split(".")[0] not in type(self).model_fields
        }
        if unknown:
            raise ValueError(
                f"estimated_fields names unknown field(s): {', '.join(sorted(unknown))}"
            )
        if self.purchase is not None and self.form_factor != FormFactor.edge:
            raise ValueError("purchase applies to edge devices (cloud hardware is priced per hour)")
        if self.host is not None and self.form_factor != FormFactor.edge:
            raise ValueError("host applies to edge devices (a cloud instance includes its host)")
        if self.socket_cores and self.socket_threads and self.socket_threads < self.socket_cores:
            raise ValueError("socket_threads cannot be below socket_cores")
        for mode in self.power_modes:
            if mode.power_w > self.tdp_w:
                raise ValueError(
                    f"power mode {mode.name!r} draws {mode.power_w} W, above tdp_w {self.tdp_w} W"
                )
        return self


class Price(Strict):
    region: Annotated[str, Field(min_length=1)]
    purchase: Purchase
    hourly_usd: Annotated[float, Field(gt=0, le=2_000)]
    as_of: dt.date
    source: Annotated[str, Field(min_length=1)]
    # Why the price sanity checks (advisor/catalog/cross_checks.py price_flags) doubt this price;
    # set by the loader after the checks, never read from a catalog file.
    flag: str | None = None

    @field_validator("purchase")
    @classmethod
    def _purchase_has_a_term(cls, value: Purchase) -> Purchase:
        if value is Purchase.reserved:
            raise ValueError("a reserved price states its term: reserved_1y or reserved_3y")
        return value

    def age_days(self, today: dt.date) -> int:
        """Days since `as_of`: the one staleness measure (loader warning, `catalog stale`)."""
        return (today - self.as_of).days

    @field_validator("flag")
    @classmethod
    def _flag_is_not_data(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The loader validates catalog files with context {"catalog_file": True}.
        if value is not None and (info.context or {}).get("catalog_file"):
            raise ValueError("flag is set by the price sanity checks, not in catalog files")
        return value


# Who rents an instance type; a provider joins only with sourced prices (catalog/README.md).
Provider = Literal["aws", "gcp", "azure", "oci", "lambda", "runpod", "coreweave", "other"]


class InstanceType(Strict):
    id: Id
    provider: Provider
    accelerator: Id | None  # None = CPU-only
    cpu: Id | None = None  # catalog CPU class for CPU-only offerings
    gpu_count: Annotated[int, Field(ge=0, le=64)]
    vcpus: Annotated[int, Field(gt=0)]
    memory_gib: Annotated[float, Field(gt=0, le=65_536)]
    gpu_link: GpuLink = GpuLink.none
    # per-GPU GPU-to-GPU bandwidth inside the instance
    interconnect_gb_s: Annotated[float, Field(ge=0, le=10_000)] = 0
    network_gbps: Annotated[float, Field(ge=0, le=100_000)]  # scale-out network between instances
    # GPUs one NVLink domain spans where it reaches beyond the instance (a GB200/GB300 NVL72 tray
    # of 4 GPUs sits in a 72-GPU NVLink rack); None: the domain is the instance's own GPUs.
    nvlink_domain_gpus: Annotated[int | None, Field(ge=2, le=576)] = None
    # What the provider states as total GPU memory; cross-checked against gpu_count x accelerator.
    gpu_memory_total_gb: NonNeg | None = None
    prices: tuple[Price, ...] = ()
    # Whole-node power (advisor/catalog/power.py): the reference system (catalog `systems`) whose
    # published maximum the instance is built on, or else GPUs' TDP plus the host's share.
    system: Id | None = None
    # vCPUs per physical core where the provider disables SMT (AWS c7a: one vCPU is one core);
    # None: the CPU class's threads per core.
    vcpus_per_core: Literal[1, 2] | None = None
    notes: str | None = None
    source: Annotated[str, Field(min_length=1)]
    # Set from catalog/node_facts.yaml at load (advisor/catalog/loading.py), or written here.
    expected_nccl_busbw: NcclBusBandwidth | None = None

    @model_validator(mode="after")
    def _gpu_fields_agree(self) -> Self:
        if self.accelerator is None and self.gpu_count:
            raise ValueError("gpu_count must be 0 when accelerator is null (CPU-only)")
        if self.accelerator is not None and not self.gpu_count:
            raise ValueError("gpu_count must be at least 1 when an accelerator is set")
        if self.accelerator is None and self.cpu is None:
            raise ValueError("a CPU-only instance type needs `cpu` (a catalog CPU class id)")
        if self.gpu_count <= 1 and self.interconnect_gb_s:
            raise ValueError("interconnect_gb_s must be 0 with fewer than two GPUs")
        if self.nvlink_domain_gpus is not None and self.nvlink_domain_gpus <= self.gpu_count:
            raise ValueError("nvlink_domain_gpus is for a domain larger than the instance's GPUs")
        return self


class NodeSystem(Strict):
    """A whole GPU node whose vendor publishes its system power (catalog/systems.yaml): cloud
    instances built on the same board refer to it with `system`."""

    id: Id
    name: Annotated[str, Field(min_length=1)]
    accelerator: Id  # the GPU it is built with
    gpu_count: Annotated[int, Field(ge=1, le=64)]
    max_power_w: Annotated[float, Field(gt=0, le=200_000)]  # the vendor's maximum system power
    # The system's scale-out network, all its compute NICs together (Gbit/s); None: the vendor
    # states none (the system is not a reference for jobs across nodes).
    network_gbps: Annotated[float | None, Field(ge=0, le=100_000)] = None
    notes: str | None = None
    source: Annotated[str, Field(min_length=1)]


class SpotInterruption(Strict):
    """How often a provider reclaims spot capacity (catalog/spot.yaml), as it states it: a
    fraction of instances interrupted over a period (AWS: a month; GCP: a day). Converted to a
    rate per node-hour by advisor/perf/spot.py rate_per_node_h."""

    id: Id
    provider: Provider
    # Instance-id prefixes this entry is for ("p5." = the p5 family); empty: the whole provider.
    # The longest matching prefix wins over the provider-wide entry.
    instance_prefixes: tuple[str, ...] = ()
    # The edge plans are made at: the upper edge of the provider's band (a plan should not be
    # optimistic about interruptions), over `period_h`.
    fraction_interrupted: Annotated[float, Field(gt=0, lt=1)]
    period_h: Annotated[float, Field(gt=0, le=10_000)]
    # The band's lower edge over the same period, where the provider states a band: plans give
    # the range between the two edges.
    band_low_fraction: Annotated[float, Field(gt=0, lt=1)] | None = None
    published: Annotated[str, Field(min_length=1)]  # what the provider publishes, in its words
    estimated: bool  # True: the figure is not published as such (see `basis`)
    basis: Annotated[str, Field(min_length=1)]  # how the figure was chosen
    source: Annotated[str, Field(min_length=1)]

    @model_validator(mode="after")
    def _low_below_high(self) -> Self:
        if (
            self.band_low_fraction is not None
            and self.band_low_fraction > self.fraction_interrupted
        ):
            raise ValueError(
                "band_low_fraction is the band's lower edge: at most fraction_interrupted"
            )
        return self


class SpotPolicy(Strict):
    """How a workload's spot plans are costed and bounded (advisor/perf/spot.py)."""

    checkpoint_interval_h: Annotated[float, Field(gt=0, le=1000)]  # default when not requested
    restart_h: Annotated[float, Field(ge=0, le=1000)]  # per interruption: re-acquire, reload
    # A synchronous multi-node spot plan beyond either bound is rejected (SPOT_TOO_RISKY).
    max_interruptions: Annotated[float, Field(gt=0)]
    max_added_fraction: Annotated[float, Field(gt=0)]
    basis: Annotated[str, Field(min_length=1)]
    estimated: bool
    source: Annotated[str, Field(min_length=1)]


Objective = Literal[
    "cheapest",
    "performance",
    "price_performance",
    "cost_to_completion",
    "time",
    "cost_per_million_tokens",
]


class LatencyTargets(Strict):
    """Default latency targets of a serving workload, where the request states none."""

    max_ttft_ms: Pos | None = None
    max_itl_ms: Pos | None = None
    basis: Annotated[str, Field(min_length=1, max_length=80)]  # what they are, in a few words
    source: Annotated[str, Field(min_length=1)]
    # The percentile of requests the default targets hold for (MLPerf's limits are p99).
    percentile: Literal[50, 90, 99] = 50
    # The load a request that states none is sized for (requests/s), and why: serving sized for
    # the user's latency at a stated load, never for saturation unless asked.
    request_rate: Pos | None = None
    load_basis: Annotated[str | None, Field(min_length=1, max_length=200)] = None


class WorkloadProfile(Strict):
    """The rules for one workload type, as data (catalog/workloads.yaml)."""

    id: Id
    description: Annotated[str, Field(min_length=1)]
    form_factors: tuple[FormFactor, ...]  # which kinds of hardware are eligible at all
    job: Job  # what it asks of an accelerator (Accelerator.jobs)
    scale_out: bool = False  # may span several nodes
    min_multi_node_network_gbps: NonNeg = 0  # required between nodes when spanning several
    min_gpu_memory_gb: NonNeg = 0  # floor per GPU regardless of the request (e.g. training)
    # GPUs to plan for when the request states no count: "large-scale" means many GPUs.
    default_gpu_count: Annotated[int, Field(ge=0, le=4096)] = 0
    key_precision: Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"] = "bf16"
    default_objective: Objective = "cheapest"
    # Sizing from a model (advisor/planning/): what kind of work, and for training the share
    # of the dense peak it gets (model FLOPs utilisation). Inference reads the inference model's
    # efficiencies per accelerator generation instead (advisor/perf/inference.py).
    sizing: Literal["training", "inference", "none"] = "none"
    efficiency: Annotated[float, Field(gt=0, le=1)] = 0.4
    default_batch: Annotated[int, Field(ge=1, le=100_000)] = 1  # micro-batch / sequences served
    # Serving that must answer within a latency (advisor/planning/limits.py latency_targets).
    latency_targets: LatencyTargets | None = None
    # Soft preferences, applied as multiplicative score penalties (0.2 = 20% worse) with a reason.
    prefer_gpu_link: tuple[GpuLink, ...] = ()
    prefer_form_factor: FormFactor | None = None
    preference_penalty: Annotated[float, Field(ge=0, le=10)] = 0.15
    # Training on spot: checkpoint interval, restart time and the bounds (None: not costed).
    spot: SpotPolicy | None = None
    rationale: Annotated[str, Field(min_length=1)]


class CollectiveReference(Strict):
    """Collective and peer-copy figures measured on a known-good node of `gpus` GPUs."""

    gpus: Annotated[int, Field(ge=2, le=64)]
    link: GpuLink
    # nccl-tests busbw (GB/s) per message size, named as nccl-tests names them ("256M", "1G")
    all_reduce_busbw_gb_s: dict[str, Pos]
    p2p_copy_gbps: Pos | None = None  # one direction, GPU to GPU
    conditions: str | None = None
    source: Annotated[str, Field(min_length=1)]


class ProbeExpectation(Strict):
    """Achievable figures for one accelerator, measured on a known-good machine (or published).

    Where an accelerator has none, verification derives expectations from its datasheet figures.
    """

    id: Id  # the accelerator id these figures are for
    matmul_tflops: PeakTflops = Field(default_factory=PeakTflops)  # a plain torch matmul loop
    d2d_gbps: Pos | None = None  # device-to-device copy, bytes read + written per second
    collectives: CollectiveReference | None = None
    conditions: str | None = None  # sizes, software, how they were taken
    source: Annotated[str, Field(min_length=1)]


class ModelPreset(Strict):
    """An open model's shape, for sizing (catalog/models.yaml). Figures from its config/paper."""

    id: Id
    name: Annotated[str, Field(min_length=1)]
    params_b: Annotated[float, Field(gt=0, le=100_000)]  # total parameters, billions
    active_params_b: Annotated[float | None, Field(gt=0, le=100_000)] = None  # MoE: per token
    layers: Annotated[int, Field(gt=0, le=1000)]
    hidden_size: Annotated[int, Field(gt=0, le=1_000_000)]
    attention_heads: Annotated[int, Field(gt=0, le=10_000)]
    kv_heads: Annotated[int, Field(gt=0, le=10_000)]
    head_dim: Annotated[int | None, Field(gt=0, le=100_000)] = None  # default hidden / heads
    vocab_size: Annotated[int, Field(gt=0, le=10_000_000)]
    context_length: Annotated[int, Field(gt=0, le=100_000_000)]
    experts: Annotated[int | None, Field(gt=0, le=10_000)] = None  # routed experts per layer
    experts_per_token: Annotated[int | None, Field(gt=0, le=10_000)] = None  # routing top-k
    # Experts of intermediate_size every token passes through besides its top-k (DeepSeek-V3:
    # n_shared_experts 1), and node-limited routing: the most nodes (expert groups) a token's
    # experts may sit on (DeepSeek-V3: topk_group 4), which bounds its all-to-all traffic.
    shared_experts: Annotated[int, Field(ge=0, le=1000)] = 0
    route_nodes: Annotated[int | None, Field(gt=0, le=10_000)] = None
    # Sliding-window attention: each layer keeps K/V of at most this many recent tokens.
    sliding_window: Annotated[int | None, Field(gt=0, le=100_000_000)] = None
    # Hybrid attention (gpt-oss alternates windowed and full layers): how many layers keep the
    # window; None with a window: all of them.
    sliding_window_layers: Annotated[int | None, Field(ge=0, le=1000)] = None
    # "gqa": K and V of kv_heads x head_dim per layer (multi-head attention is kv_heads = heads).
    # "mla": multi-head latent attention (DeepSeek-V2/V3) caches one compressed latent of
    # kv_lora_rank plus a shared decoupled RoPE key of qk_rope_head_dim per layer and token.
    attention: Literal["gqa", "mla"] = "gqa"
    kv_lora_rank: Annotated[int | None, Field(gt=0, le=100_000)] = None
    qk_rope_head_dim: Annotated[int | None, Field(gt=0, le=100_000)] = None
    # MLP width (config.json intermediate_size; per expert for mixture of experts) and whether
    # the MLP is gated (SwiGLU: gate, up, down projections) or plain (up, down): what the LoRA
    # adapter count reads (advisor/perf/sizing.py lora_adapter_params).
    intermediate_size: Annotated[int | None, Field(gt=0, le=10_000_000)] = None
    gated_mlp: bool = True
    # The output head shares the input embedding table (GPT-2/3); untied (Llama, Mistral, Qwen2.5
    # 7B+, DeepSeek), a forward pass looks up its tokens' rows and never reads the table whole.
    tied_embeddings: bool = False
    # Trained with dropout (GPT-2/3: resid_pdrop and attn_pdrop 0.1): its masks are activations
    # the backward keeps (advisor/perf/sizing.py); the 2023+ open models train without.
    dropout: bool = False
    notes: str | None = None
    source: Annotated[str, Field(min_length=1)]

    @model_validator(mode="after")
    def _shape_is_consistent(self) -> Self:
        if self.attention_heads % self.kv_heads:
            raise ValueError("attention_heads must be a multiple of kv_heads")
        if self.active_params_b is not None and self.active_params_b > self.params_b:
            raise ValueError("active_params_b cannot exceed params_b")
        if (self.experts is None) != (self.experts_per_token is None):
            raise ValueError("give both experts and experts_per_token, or neither")
        if self.experts and self.experts_per_token and self.experts_per_token > self.experts:
            raise ValueError(
                f"experts_per_token {self.experts_per_token} exceeds experts {self.experts}"
            )
        if self.experts is not None and self.active_params_b is None:
            raise ValueError("a mixture-of-experts model needs active_params_b")
        if (self.sliding_window_layers or 0) > self.layers:
            raise ValueError(
                f"sliding_window_layers {self.sliding_window_layers} exceeds layers {self.layers}"
            )
        if self.sliding_window is not None and self.sliding_window > self.context_length:
            raise ValueError(
                f"sliding_window {self.sliding_window} exceeds context_length {self.context_length}"
            )
        return self._attention_is_consistent()

    def _attention_is_consistent(self) -> Self:
        mla_fields = (self.kv_lora_rank, self.qk_rope_head_dim)
        if self.attention == "mla" and None in mla_fields:
            raise ValueError("attention mla needs kv_lora_rank and qk_rope_head_dim")
        if self.attention == "gqa" and mla_fields != (None, None):
            raise ValueError("kv_lora_rank and qk_rope_head_dim apply only to attention mla")
        return self

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.attention_heads
