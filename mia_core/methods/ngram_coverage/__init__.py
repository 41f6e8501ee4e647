"""N-gram coverage attack (Hallinan et al., COLM 2025, arXiv 2508.09603; docs/methods.md, "ngram_coverage").

Black box: only sampled text is used, never a log-prob. The last words of the text are cut off; the target
samples `m` continuations of the rest; a model that saw the text regurgitates runs of its true suffix. With `W` the
text's whitespace words, `k = max(1, min(int(ρ·|W|), |W|−1))` words removed from the end, the split made at a token
boundary (`s` = the tokens, encoded without special tokens, that end at or before the first removed word starts):

    prefix = decode(ids[:s]),   suffix = decode(ids[s:]),   g_j ~ p(· | task_prompt + prefix), j = 1..m
    G_j, R = casual_tokenize(unidecode(g_j)), casual_tokenize(unidecode(suffix))
    cov_L(g_j) = |words of G_j inside runs of ≥ L words found in R| / |G_j|   (0 if |G_j| < L)
    score = max_j cov_L(g_j)

The runs come from the authors' span search (`matching.find_spans`); with `unique` (default) a run already counted
in the same continuation is skipped. Variants: `normalization` (ref_length, total_length), `aggregate` (min, median,
mean), and the creativity variant `CI(g) = Σ_{n=ci_min}^{ci_max} cov_n(g)`. Higher = member, no negation.

Reference: the authors' code (`shallinan1/membership-inference` 9269621, `src/attacks/ngram_coverage_attack/`;
`src/experiments/utils.py remove_last_n_words`). Deviations and gaps:
- Runs match as word sequences by default. Theirs match when the Moses-detokenized run is a *character substring*
  of the unidecoded suffix ("he lazy dog" matches "the lazy dog"); `mode="reference"` does that (sacremoses), and
  keys `unique` by the detokenized text as they do (by default: by the words). The mask of reproduced suffix words
  marks word-aligned occurrences of the runs only.
- Sampling is seeded per text by (seed, sha256(text), j) with the shared Gumbel-max sampler
  (`mia_core.model.sampling`), batched across texts whose prompts have equal token counts; theirs seeds vLLM once per
  run. No top-k cut (vLLM's default). The model's own generation settings apply.
- The prompt is tokenized as the statistics pass would (BOS policy); chat templates are not applied (base models
  only), and one `task_prompt` is used per run (theirs may pool several templates' generations).
- The continuation budget is capped at the model's context minus the prompt (recorded in `details`).
- Sentence mode (NLTK punkt, a data download) is not implemented; a `words_from_end` beyond |W| − 1 is an error
  (theirs clamps it silently).
Unconfirmed (METHODS-FIELD.md §14): the paper was not read; the statistic, L, ρ and m behind its headline numbers.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...api import AccessNeeds, Paper, Score, TokenStats, TokenView, register
from ...deferred import deferred
from .params import NgramCoverageParams

if TYPE_CHECKING:  # NLTK, torch and transformers load when a text is scored, not when the method is registered
    from ...model import sampling
    from ...model.language_model import LanguageModel
    from . import matching
else:
    sampling = deferred("mia_core.model.sampling")
    matching = deferred(f"{__name__}.matching")

WHITESPACE = " \n\r\t"  # the authors' word boundaries (`remove_last_n_words`)


def removed_words(text: str, params: NgramCoverageParams) -> int:
    """k, the words cut from the end: a fixed `words_from_end`, else max(1, min(int(ρ·|W|), |W| − 1))."""
    n_words = len(text.split())
    if n_words < 2:
        raise ValueError(f"N-gram coverage needs a text of at least two words to split into a prefix and a suffix "
                         f"(got {n_words})")
    if params.words_from_end:
        if params.words_from_end > n_words - 1:
            raise ValueError(f"words_from_end={params.words_from_end} leaves no prefix: the text has {n_words} words")
        return int(params.words_from_end)
    return max(1, min(int(n_words * float(params.suffix_fraction)), n_words - 1))


def split_text(tokenizer, text: str, params: NgramCoverageParams) -> tuple[str, str, int]:
    """(prefix, suffix, the suffix's token count): the text cut at the token boundary before its last k words."""
    starts = [i for i, c in enumerate(text) if c not in WHITESPACE and (i == 0 or text[i - 1] in WHITESPACE)]
    k = min(removed_words(text, params), len(starts) - 1)
    if k < 1:
        raise ValueError("N-gram coverage needs at least two space-separated words to split the text")
    try:
        enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    except NotImplementedError as exc:  # slow (Python) tokenizers give no offsets
        raise ValueError("N-gram coverage splits the text at a token boundary and needs a tokenizer with character "
                         "offsets (a fast tokenizer)") from exc
    ids, cut = enc["input_ids"], starts[-k]
    s = sum(1 for _, end in enc["offset_mapping"] if end <= cut)
    if s == 0 or s == len(ids):
        raise ValueError("N-gram coverage found no token boundary between the text's prefix and its last "
                         f"{k} words")
    return tokenizer.decode(ids[:s]), tokenizer.decode(ids[s:]), len(ids) - s


def plan(lm: LanguageModel, text: str, params: NgramCoverageParams, bos: str) -> tuple[list[int], int]:
    """(prompt ids under the BOS policy, tokens to sample): an error if the suffix is too short or no room is left."""
    prefix, suffix, n_suffix = split_text(lm.tokenizer, text, params)
    if len(matching.words(suffix)) < params.ngram:
        raise ValueError(f"the suffix {suffix!r} has {len(matching.words(suffix))} words, fewer than ngram="
                         f"{params.ngram}: no run of {params.ngram} words can match it")
    ids = lm._with_boundary(lm._encode(params.task_prompt + prefix)[0], bos)
    budget = min(int(params.max_new_tokens) or n_suffix, lm.max_length - len(ids))
    if budget < 1:
        raise ValueError(f"the N-gram coverage prompt takes {len(ids)} tokens of the model's {lm.max_length}: no "
                         "room to sample a continuation")
    return ids, budget


def _sampling(params: NgramCoverageParams):
    """The shared sampler's settings (no top-k cut, as vLLM's default)."""
    return sampling.Sampling(int(params.n_samples), int(params.seed), float(params.temperature), 0,
                             float(params.top_p))


def generate(lm: LanguageModel, plans: dict[str, tuple[list[int], int]], params: NgramCoverageParams
             ) -> dict[str, list[str]]:
    """Text → its sampled continuations, decoded with special tokens skipped (the prompt not included)."""
    found = sampling.sample_continuations(lm, {t: p[0] for t, p in plans.items()},
                                          {t: p[1] for t, p in plans.items()}, _sampling(params))
    return {t: lm.tokenizer.batch_decode(rows, skip_special_tokens=True) for t, rows in found.items()}


def prepare(stats: list[TokenStats], params: NgramCoverageParams, *, lm: LanguageModel) -> list[list[str] | None]:
    """Every text's continuations sampled in shared `generate` calls (None where the text cannot be split or
    prompted: `ngram_coverage` then says why)."""
    plans: dict[str, dict[str, tuple[list[int], int]]] = {}  # BOS policy → text → (prompt ids, budget)
    for s in stats:
        try:
            plans.setdefault(s.bos_policy, {})[s.text] = plan(lm, s.text, params, s.bos_policy)
        except ValueError:
            continue
    found = {(bos, t): g for bos, group in plans.items() for t, g in generate(lm, group, params).items()}
    return [found.get((s.bos_policy, s.text)) for s in stats]


def generation_score(gen: list[str], ref: list[str], params: NgramCoverageParams, suffix: str
                     ) -> tuple[float, list]:
    """One continuation's coverage (or creativity index) and its runs; 0 and no runs if it has fewer than L words.

    `mode="reference"` finds runs and keys `unique` by their detokenized text in the suffix's characters, as the
    authors' code."""
    if len(gen) < params.ngram:
        return 0.0, []
    reference = params.mode == "reference"
    occurs = matching.substring_occurs(gen, suffix) if reference else None
    spans = matching.find_spans(gen, ref, int(params.ngram), occurs)
    kw = {"ref_length": len(ref), "unique": bool(params.unique), "normalization": params.normalization,
          "key": matching.detokenize if reference else tuple}
    if params.statistic == "creativity":
        value = sum(matching.coverage(gen, spans, min_run=n, **kw) for n in range(params.ci_min, params.ci_max + 1))
    else:
        value = matching.coverage(gen, spans, min_run=1, **kw)  # every run is ≥ L words already
    return float(value), spans


AGGREGATE = {"max": np.max, "min": np.min, "median": np.median, "mean": np.mean}


@register("ngram_coverage", access=AccessNeeds(token_logprob=False, generation=True,
                                                  why="continuations sampled from the text's prefix"),
          lesson=520, paper=Paper("Hallinan et al.", 2025, "https://arxiv.org/abs/2508.09603",
                                  "The Surprising Effectiveness of Membership Inference with Simple N-Gram Coverage",
                                  "COLM 2025"),
          fails=("It sees only what sampling brings back: a model that saw the text but rarely reproduces it "
                 "word for word scores like one that never saw it, and a suffix shorter than L words or a one-word "
                 "text cannot be scored (METHODS-FIELD.md §14)."),
          view=TokenView("no per-token score (0 on every token): the score reads sampled text only",
                         "none (no model token enters the score)", centre=0.0),
          label="N-gram coverage", params=NgramCoverageParams, needs=("stats", "lm"), token_level=False,
          prepare=prepare,
          reading=lambda v: f"the best of the continuations sampled from the text's prefix has {v:.2f} of its words "
                            "inside runs of at least L words (4 by default) copied from the text's true ending (a "
                            "sum over run lengths in the creativity variant); a model that saw the text reproduces "
                            "more of it.",
          formula=r"\mathrm{score}(x) = \max_{j} \frac{\big|\{i : G_j[i] \in \text{a run of} \ge L \text{ words "
                  r"found in } x_{\mathrm{suf}}\}\big|}{|G_j|},\ g_j \sim p(\cdot \mid x_{\mathrm{pre}})",
          idea="Black box: prompt with the text's beginning and sample continuations; a model that saw the text "
               "regurgitates long runs of its true ending.",
          cost="m sampled generations of about the suffix's token count",
          extra_passes=lambda p: p.n_samples,  # generations about as long as the suffix
          summary="Black box: the largest share of a sampled continuation's words lying in runs of ≥ L words of the "
                  "text's true suffix.")
def ngram_coverage(stats: TokenStats, params: NgramCoverageParams, *, lm: LanguageModel,
                   context: list[str] | None) -> Score:
    """The best (by `aggregate`) coverage of the suffix's word runs among sampled continuations (`context`, from
    `prepare`); details: the split, the continuations with their coverage and runs, the suffix words reproduced."""
    prefix, suffix, _ = split_text(lm.tokenizer, stats.text, params)
    ids, budget = plan(lm, stats.text, params, stats.bos_policy)  # raises why not
    outputs = context if context is not None else generate(lm, {stats.text: (ids, budget)}, params)[stats.text]
    ref = matching.words(suffix)
    rows, runs = [], []
    for output in outputs:
        gen = matching.words(output)
        value, spans = generation_score(gen, ref, params, suffix)
        runs += [gen[a:b] for a, b in spans]
        rows.append({"generation": output, "words": len(gen), "score": value, "too_short": len(gen) < params.ngram,
                     "runs": " | ".join(" ".join(gen[a:b]) for a, b in spans)})
    value = float(AGGREGATE[params.aggregate](np.array([r["score"] for r in rows], dtype=np.float64)))
    details = {"prefix": prefix, "suffix": suffix, "max_new_tokens": budget, "samples": rows,
               "suffix_words": ref, "reproduced": matching.reproduced(ref, runs)}
    return Score(value, np.zeros(stats.n_scored, np.float64), np.zeros(stats.n_scored, bool), details)
