"""`LanguageModel`: a causal LM run in process with transformers — its weights, device, precision and batched forward
passes; the statistics pipeline it feeds them through is `StatsModel`'s (tokenise, BOS policy, windows, cache)."""
from __future__ import annotations

import hashlib
from typing import Iterator

import torch
from torch import nn

from ..api.access import FULL_ACCESS, ModelAccess
from .placement import cuda_devices, input_device
from .identity import tokenizer_fingerprint
from .pipeline import FinishedBatch, Wave, iter_wave_batches
from .stats_cache import StatsCache
from .stats_model import StatsModel
from .waves import plan_waves

#: Padded tokens per batch on CPU; on CUDA the budget comes from free memory.
CPU_BATCH_TOKENS = 4096


class LanguageModel(StatsModel):
    """A loaded causal LM: `.model`, `.tokenizer`, `.name`, `.spec`, `.device`, `.fingerprint`."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer,
        *,
        name: str,
        fingerprint: str | None = None,
        max_length: int | None = None,
        stats_cache: StatsCache | None = None,
        spec: str | None = None,
    ):
        self.model = model.eval()
        config_max = getattr(model.config, "max_position_embeddings", None) or getattr(
            model.config, "n_positions", None
        )
        super().__init__(tokenizer, name=name, spec=spec, fingerprint=fingerprint or _weights_fingerprint(model, tokenizer),
                         max_length=min(v for v in (max_length, config_max, 1 << 20) if v), stats_cache=stats_cache)

    @property
    def access(self) -> ModelAccess:
        """In process, the model offers every kind of access (full distribution, further passes, gradients,
        generation); `mia_core.methods_allowed(lm)` therefore allows every method."""
        return FULL_ACCESS

    @property
    def device(self) -> torch.device:
        """Where inputs go: the input embedding's device (the first of a model sharded across devices)."""
        return input_device(self.model)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def pad_id(self) -> int:
        """An id to pad batches with: the tokenizer's pad token if the embedding has it, else 0 (padding is masked)."""
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None and pad < self.vocab_width else 0

    @property
    def vocab_width(self) -> int:
        """Width of the logits (may exceed `len(tokenizer)`, e.g. 50304 for Pythia)."""
        return int(self.model.get_output_embeddings().weight.shape[0])

    def __repr__(self) -> str:
        return f"LanguageModel({self.name!r}, device={self.device}, dtype={self.dtype}, fingerprint={self.fingerprint})"

    def _batches(self, waves: Iterator[Wave], budget: int, progress) -> Iterator[FinishedBatch]:
        """The forward passes of the segments, batch by batch under the token budget (halved on out-of-memory)."""
        return iter_wave_batches(self.model, waves, batch_tokens=budget, pad_id=self.pad_id, progress=progress,
                                 min_batch_tokens=self.max_length)

    def _wave_plan(self, texts: list[str], budget: int) -> list[tuple[int, int]]:
        """On CUDA, waves (`waves.plan_waves`): each next one is tokenised while the device runs the one before; on
        the CPU one wave, as a launch there computes (nothing to overlap) and one wave packs best."""
        if self.device.type != "cuda":
            return super()._wave_plan(texts, budget)
        return plan_waves([len(t) for t in texts], budget)

    def auto_batch_tokens(self) -> int:
        """Token budget per batch: fixed on CPU; on CUDA, sized from free memory (a heuristic)."""
        devices = cuda_devices(self.model) or [self.device]
        if devices[0].type != "cuda":
            return CPU_BATCH_TOKENS
        # memory this process's allocator holds but does not use is free for us too (after a big batch, the caching
        # allocator keeps it reserved and the driver reports it as used); a sharded model: its tightest GPU's
        free = min(torch.cuda.mem_get_info(d)[0] + torch.cuda.memory_reserved(d) - torch.cuda.memory_allocated(d)
                   for d in devices)
        cfg = self.model.config
        hidden = getattr(cfg, "hidden_size", 1024)
        inter = getattr(cfg, "intermediate_size", None) or 4 * hidden
        elem = torch.finfo(self.dtype).bits // 8
        # live activations of one layer per token (attention runs fused: memory linear in T);
        # an out-of-memory error halves the budget and retries (`mia_core.model.pipeline`)
        per_token = elem * (8 * hidden + 4 * inter)
        return int(min(max(free * 0.5 // per_token, self.max_length), 1 << 17))


def _weights_fingerprint(model: nn.Module, tokenizer) -> str:
    """Hash of every parameter tensor and the tokenizer (for models built in memory)."""
    digest = hashlib.sha256(tokenizer_fingerprint(tokenizer).encode())
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]

