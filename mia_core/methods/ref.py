"""Reference-model calibration (Carlini et al. 2021): target log-likelihood minus a reference's.

Each model scores the text with **its own** tokenizer (the Min-K%++ repository feeds the target's
token ids to the reference model, which is wrong whenever the tokenizers differ). The per-token
scores shown are the target's log-probs (the two tokenisations do not align).
"""
from __future__ import annotations

import numpy as np

from ..api import AccessNeeds, NoParams, Paper, Score, TokenStats, TokenView, register, require_tokens


@register("ref", access=AccessNeeds(),
          lesson=320, paper=Paper("Carlini, Tramèr, Wallace et al.", 2021, "https://arxiv.org/abs/2012.07805",
                                  "Extracting Training Data from Large Language Models", "USENIX Security 2021"),
          fails=("It needs a second model trained on similar data (the papers use the smallest of the same family, "
                 "e.g. Pythia-70M for Pythia), and the Min-K%++ repository fed the target's tokens to the reference "
                 "model, a bug (METHODS.md); it is impractical for online detection (Min-K%++ paper)."),
          view=TokenView("the per-token output shown with Reference model, which scores the text as a whole (for "
                         "orientation only)",
                         "the tokens it looked at"),
          label="Reference model", needs=("stats", "ref_stats"), token_level=False,
          reading=lambda v: f"the target model finds the text {v:.2f} nats per token more likely than the reference model.",
          formula=r"\mathrm{score}(x) = \overline{\log p_{\text{target}}}(x) - \overline{\log p_{\text{ref}}}(x)",
          idea="A smaller model of the same data calibrates how hard the text is.", cost="1 forward pass + 1 of the reference model",
          extra_passes=lambda p: 1,
          summary="Mean log-prob under the target minus under a smaller reference model trained on similar data.")
def ref(stats: TokenStats, params: NoParams, *, ref_stats: TokenStats) -> Score:
    """`mean logprob_target − mean logprob_ref` (higher = member)."""
    require_tokens(stats)
    require_tokens(ref_stats)
    target = stats.logprob.astype(np.float64)
    value = float(np.mean(target) - np.mean(ref_stats.logprob, dtype=np.float64))
    return Score(value, target, np.ones(stats.n_scored, bool))
