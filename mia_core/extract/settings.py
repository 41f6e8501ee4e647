"""`ExtractionSettings`: the window layout and sampling scheme of (n,p)-discoverable extraction, one validated value.

Defaults are Cooper et al.'s (arXiv 2505.12546): 50-token prefixes and suffixes, top-k sampling with k = 40 at
temperature 1. The paper slides its windows 10 *characters* at a time; our windows (`windows="ours"`) slide `stride`
tokens, theirs (`windows="reference"`, `extract.reference`) `stride` characters (docs/methods.md, "Extraction").
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..model.policy import BOS_POLICIES
from ..names import check_choice

#: Tokens per prefix and suffix, and the largest stride, a user may ask for (a window is fed whole to the model).
MAX_WINDOW_TOKENS = 4096
#: Windows one call computes at most: their fed ids are held at once (8·(P+S+1) bytes each, twice while duplicates are
#: found: 0.8 GB at the defaults), so a longer input is refused with what to change.
MAX_WINDOWS = 500_000
#: The largest top-k (the full vocabulary of today's models is below it; a larger k is plain temperature sampling).
MAX_TOP_K = 1 << 20
#: How windows are cut: "ours" (token windows, `extract.windows`) or "reference" (Cooper et al.'s code's character
#: windows and greedy rule, `extract.reference`).
WINDOW_SCHEMES = ("ours", "reference")


@dataclass(frozen=True)
class ExtractionSettings:
    """How windows are cut and how the model would sample their suffixes.

    prefix, suffix : tokens the model is given, and tokens it must reproduce (paper: 50 and 50); under "reference"
        windows the prefix counts the lead token (BOS + P−1 text tokens), as their code's `suffix_start_index`.
    stride : tokens ("ours") or characters ("reference") between the starts of consecutive windows (10: each text
        token is fed (P+S)/10 times under "ours").
    top_k, temperature : the sampling scheme whose probability p_z is computed (paper: k = 40, T = 1);
        greedy extraction (k = 1) is reported beside it for every window.
    bos : "auto" feeds the model's document-boundary token before each window's prefix (as the statistics
        pass does before a text); "none" feeds the prefix alone.
    windows : "ours" (windows of the whole text's tokens, ties at the top count as greedy) or "reference" (Cooper et
        al.'s code: character slices re-tokenised, the greedy probability with a tie of m tokens at the top as 1/m).
    """

    prefix: int = 50
    suffix: int = 50
    stride: int = 10
    top_k: int = 40
    temperature: float = 1.0
    bos: str = "auto"
    windows: str = "ours"

    def __post_init__(self) -> None:
        for name in ("prefix", "suffix", "stride"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WINDOW_TOKENS:
                raise ValueError(f"{name} must be a whole number of tokens from 1 to {MAX_WINDOW_TOKENS} (got {value!r})")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or not 1 <= self.top_k <= MAX_TOP_K:
            raise ValueError(f"top-k must be a whole number from 1 to {MAX_TOP_K} (got {self.top_k!r})")
        temperature = self.temperature
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or \
                not (math.isfinite(temperature) and temperature > 0):
            raise ValueError(f"temperature must be a number above 0 (got {temperature!r})")
        object.__setattr__(self, "temperature", float(temperature))
        check_choice("BOS policy", self.bos, BOS_POLICIES)
        check_choice("extraction windows", self.windows, WINDOW_SCHEMES)

    @property
    def window(self) -> int:
        """Text tokens per window (prefix + suffix)."""
        return self.prefix + self.suffix

    def as_dict(self) -> dict:
        """The settings as a plain dict (for records, cache keys and reports)."""
        return asdict(self)

    @property
    def stride_unit(self) -> str:
        """What the stride counts: "tokens" (our windows) or "characters" (the reference windows)."""
        return "tokens" if self.windows == "ours" else "characters"

    def key(self) -> str:
        """The part of a cache key these settings decide ("ours" windows are left out: the keys made before the
        setting existed stay valid)."""
        items = {k: v for k, v in self.as_dict().items() if not (k == "windows" and v == "ours")}
        return "|".join(f"{k}={v}" for k, v in sorted(items.items()))

    def forward_tokens_per_text_token(self) -> float:
        """Tokens fed to the model per text token: (P + S) / stride (10 at the defaults) under "ours" (under
        "reference" per text character)."""
        return self.window / self.stride
