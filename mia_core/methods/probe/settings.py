"""What a Probe fit depends on besides the model and its texts (no torch here, so the registry loads without it)."""
from __future__ import annotations

from dataclasses import dataclass

#: The authors' D_aux size (200 arXiv abstracts); fewer are warned about.
AUTHORS_AUX = 200
#: Fewest known non-members a fit accepts: A and B each need texts in the probe's training and dev parts.
MIN_AUX = 8
#: Share of A ∪ B held out as the dev set that picks the layer (SoK's 40/30/30 split gives dev 30%).
DEV_FRACTION = 0.3


@dataclass(frozen=True)
class ProbeSettings:
    """The proxy fine-tune's settings (saved with a fit)."""

    lr: float = 1e-3
    """Proxy fine-tune's constant AdamW LR (the authors swept {8e-4, 9e-4, 1e-3} for TinyLlama, full fine-tuning)."""
    epochs: int = 2
    """Proxy fine-tune epochs over A (the authors: 2)."""
    lora_r: int = 16
    """LoRA rank of the proxy fine-tune (α = 2r); 0 = full fine-tuning, the authors' (≈ 16 bytes per parameter)."""
    batch_size: int = 8
    """Texts per proxy fine-tune step (the authors: 100 for TinyLlama; smaller fits a CPU)."""
    max_tokens: int = 512
    """Tokens per wrapped text, prompt included; longer texts lose their end, the prompt's tail is kept."""

    def __post_init__(self) -> None:
        if not (0 < self.lr <= 1 and self.epochs >= 1 and 0 <= self.lora_r <= 256 and self.batch_size >= 1
                and self.max_tokens >= 32):
            raise ValueError(f"probe needs 0 < lr <= 1, epochs >= 1, 0 <= lora_r <= 256, batch_size >= 1, "
                             f"max_tokens >= 32 (got {self})")
