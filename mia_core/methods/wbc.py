"""WBC, Window-Based Comparison (Chen et al., USENIX Security 2026, arXiv 2601.02751; docs/methods.md, "wbc").

Memorisation is local: every sliding window votes "member" when the target's summed log-prob over it beats the
reference's, and the votes are averaged over several window sizes. With `d_t = ℓ_t − ℓ^ref_t` from the same-token
reference pass, for each size w ∈ W (w' = min(w, n)):

    S_i = Σ_{t=i}^{i+w'−1} d_t  (i = 1 … n−w'+1),   v_w = mean_i [S_i > 0],   score = mean_{w∈W} v_w   (in [0, 1])

as `WbcAttack._compute_window_score` in the authors' code (`Stry233/WBC` 8112878; attack code unchanged since
41d4570). A tie votes non-member (strict >, as theirs). Window sums are differences of a float64 cumulative sum;
theirs are float32 convolutions of each model's losses, whose votes can differ only on near-ties. Deviations
(METHODS-FIELD.md §13): their code tokenizes with each model's own tokenizer and cuts the two loss arrays to the
shorter, silently wrong when the tokenizers differ (we require the same tokenizer); it pads to 512 tokens with no BOS
(`bos="none"` with `long_text="truncate"` at 512 reproduces it); n = 0 returns 0.0 there and raises here.
**Unconfirmed**: the paper's spacing rule for W; we ship the list of `configs/example.yaml` and the README, which is
not an exact geometric sequence (10 geometric sizes from 2 to 40 round to 2, 3, 4, 5, 8, 11, 15, 21, 29, 40).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..api import AccessNeeds, Paper, Score, TokenStats, is_int, param, register
from .token_shift import shift_view, token_shift

#: The window sizes of the authors' `configs/example.yaml` and README.
DEFAULT_WINDOWS = "2,3,4,6,9,13,18,25,32,40"


def window_sizes(windows) -> tuple[int, ...]:
    """The window sizes W from "2,3,4", a sequence of integers or one integer; each an integer ≥ 1, none twice."""
    if isinstance(windows, str):
        parts = [p.strip() for p in windows.split(",")]
        if not all(p.isdigit() for p in parts):
            raise ValueError(f"windows must be whole numbers ≥ 1 separated by commas (got {windows!r})")
        sizes = [int(p) for p in parts]
    elif is_int(windows):
        sizes = [int(windows)]
    elif isinstance(windows, (list, tuple, np.ndarray)):
        sizes = list(windows)
    else:
        raise ValueError(f"windows must be one or more integers ≥ 1 (got {windows!r})")
    if not sizes or not all(is_int(w) and w >= 1 for w in sizes):
        raise ValueError(f"windows must be one or more integers ≥ 1 (got {windows!r})")
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"windows lists a size twice (got {windows!r})")
    return tuple(int(w) for w in sizes)


@dataclass(frozen=True)
class WbcParams:
    """Parameters of WBC."""

    windows: str = param(DEFAULT_WINDOWS, "window sizes W whose votes are averaged, comma-separated (the authors' "
                         "list; a single 1 is a token-level sign test)", widget=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "windows", ",".join(map(str, window_sizes(self.windows))))

    @property
    def sizes(self) -> tuple[int, ...]:
        return window_sizes(self.windows)


def window_votes(shift: np.ndarray, w: int) -> float:
    """v_w: the share of the windows of w' = min(w, n) consecutive tokens whose summed shift is > 0."""
    width = min(w, shift.shape[0])
    cumulative = np.concatenate(([0.0], np.cumsum(shift, dtype=np.float64)))  # (n + 1,)
    sums = cumulative[width:] - cumulative[:-width]  # (n − width + 1,)
    return float(np.mean(sums > 0))


def _reading(v: float) -> str:
    """One sentence on a WBC score."""
    return (f"a share of {v:.2f} of its sliding windows (averaged over the window sizes) find the text likelier under "
            "the target than under the reference model; members score near 1.")


@register("wbc",
          lesson=324, paper=Paper("Chen et al.", 2026, "https://arxiv.org/abs/2601.02751",
                                  "Window-based Membership Inference Attacks Against Fine-tuned Large Language Models",
                                  "USENIX Security 2026"),
          fails=("It needs a reference model with the target's tokenizer, ideally the checkpoint the target was "
                 "fine-tuned from (the authors' example uses base Pythia-2.8B); the authors' code aligns two "
                 "different tokenisations by index, silently wrong when the tokenizers differ. The paper's rule for "
                 "spacing the window sizes is unconfirmed (METHODS-FIELD.md §13)."),
          access=AccessNeeds(),
          view=shift_view("every token (each lies in windows of every size)"),
          label="WBC (window votes)", params=WbcParams, needs=("stats", "ref_same_token_stats"), token_level=True,
          reading=_reading,
          formula=r"S^{(w)}_i = \sum_{t=i}^{i+w'-1} \bigl(\log p_{\text{target}}(x_t) - \log p_{\text{ref}}(x_t)\bigr),\ "
                  r"v_w = \frac{1}{n-w'+1}\sum_i \bigl[S^{(w)}_i > 0\bigr],\ "
                  r"\mathrm{score} = \frac{1}{|W|}\sum_{w \in W} v_w",
          idea="Memorisation is local: each sliding window votes member when the target beats the reference on it.",
          cost="1 forward pass + 1 of the reference model on the target's tokens", extra_passes=lambda p: 1,
          summary="Share of sliding windows (several sizes) where the target finds the text likelier than a reference "
                  "model on the same tokens.")
def wbc(stats: TokenStats, params: WbcParams, *, ref_same_token_stats: TokenStats) -> Score:
    """Token score = d_t; sequence score = the mean over window sizes of each size's share of member votes."""
    shift = token_shift(stats, ref_same_token_stats)
    votes = {w: window_votes(shift, w) for w in params.sizes}
    value = float(np.mean(list(votes.values())))
    details = {"votes": votes, "short_text": shift.shape[0] < max(params.sizes)}
    return Score(value, shift, np.ones(shift.shape[0], dtype=bool), details)
