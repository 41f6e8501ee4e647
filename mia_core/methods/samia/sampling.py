"""SaMIA's sampling: each text's outputs (prompt + seeded continuation, decoded) from the shared sampler
(`mia_core.model.sampling`: torch, transformers).

Kept apart from the method's declaration (`mia_core.methods.samia`) so that reading the registry loads no torch.
"""
from __future__ import annotations

from ...model.language_model import LanguageModel
from ...model.sampling import Sampling, sample_continuations
from .params import SamiaParams


def sample_outputs(lm: LanguageModel, prompts: dict[str, list[int]], params: SamiaParams) -> dict[str, list[str]]:
    """Text → its `n_samples` outputs (prompt + continuation up to `max_length` tokens in all, specials skipped), for
    texts keyed to their prompt ids."""
    cap = min(int(params.max_length), lm.max_length)
    sampling = Sampling(int(params.n_samples), int(params.seed), float(params.temperature), int(params.top_k),
                        float(params.top_p))
    found = sample_continuations(lm, prompts, {t: cap - len(ids) for t, ids in prompts.items()}, sampling)
    return {t: lm.tokenizer.batch_decode([prompts[t] + row for row in rows], skip_special_tokens=True)
            for t, rows in found.items()}
