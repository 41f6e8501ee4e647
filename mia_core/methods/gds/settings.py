"""What GDS's features depend on besides the model: read by its declaration, its features and its classifier (no
torch here, so the registry loads without it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GdsSettings:
    """What the features depend on besides the model (saved with a classifier, checked on load)."""

    r: int = 16
    """LoRA rank: rows of each gradient matrix."""
    alpha: int = 32
    """LoRA scaling numerator (scale = alpha / r); it multiplies every gradient."""
    seed: int = 0
    """Seed of the random LoRA A matrices (the caller's RNG state is left untouched)."""
    max_tokens: int = 512
    """Tokens per text, boundary token included (the paper: 512; 256 for WikiMIA)."""
    bos: str = "auto"
    """BOS policy as in `LanguageModel.token_stats`: "auto" prepends the document-boundary token."""

    def __post_init__(self) -> None:
        if self.r < 2 or self.alpha <= 0 or self.max_tokens < 2 or self.bos not in ("auto", "none"):
            raise ValueError(f"GDS needs r >= 2, alpha > 0, max_tokens >= 2, bos auto|none (got {self})")
