"""The plan of a fine-tune that trains adapters (LoRA, or QLoRA on a 4-bit base): a training
run (training_run.TrainingRun) whose trained weights are the adapters, with the base weights
frozen beside them, and no expert parallelism (the experts are frozen)."""

from __future__ import annotations

from advisor.perf.sizing import TRAINING_STATE_BYTES, lora_adapter_params
from advisor.planning.training_run import TrainingRun
from advisor.units import GB


class FineTune(TrainingRun):
    """Method lora or qlora: adapters of `lora_rank` on every attention and MLP matrix."""

    def _check_method(self) -> None:
        """The adapters need the model's matrices: refused without them (exit 2)."""
        lora_adapter_params(self.shape, self.w.lora_rank)

    def _expert_share(self) -> float:
        return 0.0

    def _trained_and_frozen_gb(self) -> tuple[float, float]:
        return self._adapters() * TRAINING_STATE_BYTES / GB, self._frozen(self.w.method)
