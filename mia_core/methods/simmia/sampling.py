"""SimMIA's next-word sampling in process: each prompt's `N` samples of `NEW_TOKENS` tokens from the shared seeded
sampler (`mia_core.model.sampling`: torch, transformers), decoded alone.

Kept apart from the methods' declarations (`mia_core.methods.simmia`) so that reading the registry loads no torch.
"""
from __future__ import annotations

from ...model.language_model import LanguageModel
from ...model.sampling import Sampling, sample_continuations
from .params import NEW_TOKENS, SimMiaStarParams


def sample_next_words(lm: LanguageModel, prompts: dict[str, list[int]],
                      params: SimMiaStarParams) -> dict[str, list[str]]:
    """Prompt key → its `n_samples` continuations, decoded without the prompt (special tokens skipped), for prompts
    keyed by a string that seeds their draws (`sample_seeds`: (seed, sha256(key), j)). top-p is off (theirs)."""
    sampling = Sampling(int(params.n_samples), int(params.seed), float(params.temperature), int(params.top_k), 1.0)
    found = sample_continuations(lm, prompts, dict.fromkeys(prompts, NEW_TOKENS), sampling)
    return {key: lm.tokenizer.batch_decode(rows, skip_special_tokens=True) for key, rows in found.items()}
