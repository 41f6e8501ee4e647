"""SaMIA, sampling-based pseudo-likelihood (Kaneko et al. 2024, arXiv 2404.11262; docs/methods.md, "samia").

Black box: only sampled text is used. The first half of the text's words is the prompt; the target
samples `n_samples` continuations; a model that saw the text reproduces more of its second half.
With `W = text.split()`, `m = floor(ρ·|W|)` prompt words and `d = round(ρ·|W|)` dropped words
(Python's `round`, halves to even, as the authors' code):

    prefix = " ".join(W[:m]),   reference = W[d:],   candidate_j = split(decode(output_j))[d:]
    r_j = Σ_w min(c_ref(w), c_cand_j(w)) / |reference|          (ROUGE-1 recall on whitespace words)
    score = mean_j r_j;   zlib variant: mean_j r_j · len(zlib.compress(" ".join(candidate_j)))

Higher = member, no negation. The shared statistics pass is not used for the value; the per-token
view shows its log-probs with no token outlined (no token's log-prob enters the score).

Reference: the authors' code (`nlp-titech/samia` a2d955a, `src/sampling.py`, `src/eval_samia.py`).
Deviations:
- `L` (dropped words = round(ρ·L)) is the nominal WikiMIA length (32/64/…) there; here `|W|`.
- Words are `str.split()` everywhere; the authors split outputs and references on " " only, which
  glues words across newlines (the same words on single-spaced text such as WikiMIA).
- Their prompt is tokenized with the tokenizer's own special tokens; ours follows the text's BOS
  policy (`bos="auto"` puts the document-boundary token first, as the statistics pass does).
- Sampling: theirs calls `generate(do_sample=True)` n times per text on the global RNG. Ours is one
  `generate` call per group of texts whose prompts have the same token count (no padding), with a
  `SeededSampler` (`mia_core.model.sampling`, shared with `ngram_coverage`): temperature, top-k and
  top-p as Hugging Face's warpers, then Gumbel noise from each sample's own generator, seeded by
  (seed, sha256(text), j), and greedy choice (Gumbel-max: the same distribution). A text's draws therefore depend neither on text order nor on batching;
  the global RNG is not touched. Ids the tokenizer cannot decode (logits wider than the vocabulary,
  as in Pythia) are never drawn. The model's own generation settings (e.g. a repetition penalty)
  apply, as in theirs. A served model (vLLM) samples on its server, one request per sample seeded the
  same way (`mia_core.model.served.generation`): repeatable on that server, not equal to in-process draws.
- The continuation budget is `max_length` minus the prompt, at most the model's context; a prompt
  that leaves no room is an error (theirs truncates it to 1024 tokens).
- `truncate_candidate` (off by default; not in theirs) cuts candidates to the reference's word count.
Unconfirmed (METHODS-FIELD.md §10): the paper's PDF was not read; the defaults are the authors' code's.
"""
from __future__ import annotations

import math
import zlib
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from ...api import AccessNeeds, Paper, Score, TokenStats, TokenView, register
from ...deferred import deferred
from .params import SamiaParams

if TYPE_CHECKING:  # the sampler (torch, transformers) loads when a text is scored, not when the method is registered
    from ...model.language_model import LanguageModel
    from . import sampling
else:
    sampling = deferred(f"{__name__}.sampling")


def split_text(text: str, prefix_fraction: float) -> tuple[str, int, list[str]]:
    """(prompt, words dropped from each candidate, reference words): floor(ρ·|W|) prompt words, round(ρ·|W|) dropped."""
    words = text.split()
    n_prefix, n_drop = math.floor(len(words) * prefix_fraction), round(len(words) * prefix_fraction)
    reference = words[n_drop:]
    if n_prefix == 0 or not reference:
        raise ValueError(f"SaMIA needs a prompt and a suffix of at least one word each: {len(words)} words with "
                         f"prefix_fraction={prefix_fraction} give {n_prefix} prompt and {len(reference)} suffix words")
    return " ".join(words[:n_prefix]), n_drop, reference


def candidate_words(output: str, n_drop: int, n_reference: int | None = None) -> list[str]:
    """The words of a decoded output after the first `n_drop` (the prompt's), cut to `n_reference` words if given."""
    words = output.split()[n_drop:]
    return words if n_reference is None else words[:n_reference]


def rouge1_recall(candidate: list[str], reference: list[str]) -> float:
    """Σ_w min(c_ref(w), c_cand(w)) / |reference|: the share of reference words (with repeats) the candidate has."""
    if not candidate or not reference:
        return 0.0
    overlap = Counter(reference) & Counter(candidate)
    return sum(overlap.values()) / len(reference)


def prompt_ids(lm: LanguageModel, text: str, params: SamiaParams, bos: str) -> list[int]:
    """The prompt's ids as the statistics pass would feed them under the BOS policy; an error if no room is left."""
    ids = lm._with_boundary(lm._encode(split_text(text, float(params.prefix_fraction))[0])[0], bos)
    cap = min(int(params.max_length), lm.max_length)
    if len(ids) >= cap:
        raise ValueError(f"the SaMIA prompt takes {len(ids)} tokens and max_length is {cap} (with the model's "
                         "context): no room to sample a continuation; raise max_length or lower prefix_fraction")
    return ids


def prepare(stats: list[TokenStats], params: SamiaParams, *, lm: LanguageModel) -> list[list[str] | None]:
    """Every text's continuations sampled in shared `generate` calls; a text's context is its outputs (None where its
    words or prompt cannot be sampled: `samia` then says why)."""
    prompts: dict[str, dict[str, list[int]]] = {}  # BOS policy → text → prompt ids
    for s in stats:
        try:
            prompts.setdefault(s.bos_policy, {})[s.text] = prompt_ids(lm, s.text, params, s.bos_policy)
        except ValueError:
            continue
    found = {(bos, t): o for bos, group in prompts.items() for t, o in sampling.sample_outputs(lm, group, params).items()}
    return [found.get((s.bos_policy, s.text)) for s in stats]


@register("samia", access=AccessNeeds(token_logprob=False, generation=True,
                                         why="continuations sampled from the text's first half"),
          lesson=510, paper=Paper("Kaneko et al.", 2024, "https://arxiv.org/abs/2404.11262",
                                  "Sampling-based Pseudo-Likelihood for Membership Inference Attacks",
                                  "arXiv:2404.11262"),
          fails=("Its ROUGE-1 recall rewards longer generations (the candidate is not cut to the reference's length), "
                 "and a text too short to split into a prefix and a suffix of words cannot be scored (METHODS-FIELD.md "
                 "§10)."),
          view=TokenView("the per-token output shown with SaMIA, which scores the text as a whole (for orientation "
                         "only)",
                         "the tokens it looked at"),
          label="SaMIA", params=SamiaParams, needs=("stats", "lm"), token_level=False,
          prepare=prepare,
          reading=lambda v: f"continuations sampled from the first half of the text recover on average {v:.2f} of "
                            "its second half's words (×zlib size in the zlib variant); a model that saw the text "
                            "reproduces more of it.",
          formula=r"\mathrm{score}(x) = \frac{1}{n}\sum_{j=1}^{n} \frac{\sum_w \min\big(c_{x_{\mathrm{suf}}}(w),\ "
                  r"c_{\hat y_j}(w)\big)}{|x_{\mathrm{suf}}|},\ \hat y_j \sim p(\cdot \mid x_{\mathrm{pre}})",
          idea="Black box: sample continuations of the text's first half; a model that saw the text reproduces more "
               "of its second half.", cost="n sampled generations of up to max_length tokens",
          extra_passes=lambda p: p.n_samples,  # generations about as long as the text's second half
          summary="Black box: mean ROUGE-1 recall of the text's second half by continuations sampled from its "
                  "first half.")
def samia(stats: TokenStats, params: SamiaParams, *, lm: LanguageModel, context: list[str] | None) -> Score:
    """Mean ROUGE-1 recall (or recall × zlib size) of the suffix by sampled continuations (`context`, from
    `prepare`); details: the samples."""
    prompt, n_drop, reference = split_text(stats.text, float(params.prefix_fraction))
    outputs = context if context is not None else sampling.sample_outputs(
        lm, {stats.text: prompt_ids(lm, stats.text, params, stats.bos_policy)}, params)[stats.text]  # raises why not
    rows = []
    for output in outputs:
        words = candidate_words(output, n_drop, len(reference) if params.truncate_candidate else None)
        recall = rouge1_recall(words, reference)
        row = {"candidate": " ".join(words), "recall": recall}
        if params.zlib:
            row["zlib_bytes"] = len(zlib.compress(row["candidate"].encode("utf-8")))
        row["score"] = recall * row.get("zlib_bytes", 1)
        rows.append(row)
    value = float(np.mean([row["score"] for row in rows], dtype=np.float64))
    details = {"prompt": prompt, "reference": " ".join(reference), "dropped_words": n_drop, "samples": rows}
    return Score(value, stats.logprob.astype(np.float64), np.zeros(stats.n_scored, bool), details)
