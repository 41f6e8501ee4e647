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
  `SeededSampler`: temperature, top-k and top-p as Hugging Face's warpers, then Gumbel noise from
  each sample's own generator, seeded by (seed, sha256(text), j), and greedy choice (Gumbel-max:
  the same distribution). A text's draws therefore depend neither on text order nor on batching;
  the global RNG is not touched. Ids the tokenizer cannot decode (logits wider than the vocabulary,
  as in Pythia) are never drawn. The model's own generation settings (e.g. a repetition penalty)
  apply, as in theirs.
- The continuation budget is `max_length` minus the prompt, at most the model's context; a prompt
  that leaves no room is an error (theirs truncates it to 1024 tokens).
- `truncate_candidate` (off by default; not in theirs) cuts candidates to the reference's word count.
Unconfirmed (METHODS-FIELD.md §10): the paper's PDF was not read; the defaults are the authors' code's.
"""
from __future__ import annotations

import hashlib
import math
import zlib
from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch
from transformers import LogitsProcessor, LogitsProcessorList

from ..model.identity import text_sha256
from ..model.language_model import LanguageModel
from ..api import AccessNeeds, Paper, Score, TokenStats, TokenView, is_int, param, register

#: Tokens (rows × max_length) per `generate` call; halved on a CUDA out-of-memory error.
SAMPLE_TOKENS = 1 << 16


@dataclass(frozen=True)
class SamiaParams:
    """Parameters of SaMIA (the authors' defaults)."""

    n_samples: int = param(10, "sampled continuations per text (an integer ≥ 1)", low=1, high=20,
                           step=1)  # high: the dashboard's bound (SECURITY.md), as for max_length
    prefix_fraction: float = param(0.5, "ρ: the fraction of the text's words given as the prompt, in (0, 1)",
                                   low=0.05, high=0.95, step=0.05)
    max_length: int = param(1024, "tokens of prompt + continuation (≥ 2; capped at the model's context)", low=2,
                            high=2048, step=1)
    temperature: float = param(1.0, "sampling temperature (> 0)", low=0.05, high=5.0, step=0.05)
    top_k: int = param(50, "sample among the k most likely tokens (0: no top-k cut)", low=0, high=1000, step=1)
    top_p: float = param(1.0, "nucleus sampling mass in (0, 1] (1: no cut)", low=0.05, high=1.0, step=0.05)
    zlib: bool = param(False, "multiply each recall by the zlib-compressed size of its candidate (the authors' "
                       "`--zlib`)")
    truncate_candidate: bool = param(False, "cut each candidate to the reference's word count before comparing (not "
                                     "in the authors' code)")
    seed: int = param(0, "seed of the sampling; each text's generator is seeded by (seed, sha256(text))", widget=False)

    def __post_init__(self) -> None:
        for name, low in (("n_samples", 1), ("max_length", 2), ("top_k", 0), ("seed", 0)):
            value = getattr(self, name)
            if not is_int(value) or value < low:
                raise ValueError(f"{name} must be an integer ≥ {low} (got {value!r})")
        if not _is_real(self.prefix_fraction) or not 0 < self.prefix_fraction < 1:
            raise ValueError(f"prefix_fraction must be in (0, 1) (got {self.prefix_fraction!r})")
        if not _is_real(self.temperature) or not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (got {self.temperature!r})")
        if not _is_real(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p!r})")
        for name in ("zlib", "truncate_candidate"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False (got {getattr(self, name)!r})")


def _is_real(value) -> bool:
    """A finite number that is not a bool."""
    return (is_int(value) or isinstance(value, (float, np.floating))) and math.isfinite(value)


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


def sample_seeds(seed: int, text: str, n: int) -> list[int]:
    """One 63-bit generator seed per sample from (seed, sha256(text), j): draws depend on nothing else."""
    base = f"{int(seed)}|{text_sha256(text)}"
    return [int(hashlib.sha256(f"{base}|{j}".encode()).hexdigest()[:16], 16) >> 1 for j in range(n)]


def filter_scores(scores: torch.Tensor, *, temperature: float, top_k: int, top_p: float, n_tokens: int) -> torch.Tensor:
    """Logits (rows, width) → temperature-scaled logits with filtered tokens at −inf (ids ≥ n_tokens, top-k, top-p).

    Top-k keeps ties with the k-th; top-p keeps the most likely tokens until their mass reaches p
    (the first always), as Hugging Face's warpers, which apply temperature first too.
    """
    scores = scores.float() / temperature
    scores[:, n_tokens:] = -math.inf  # logit rows with no token (Pythia: 50277..50303) are never drawn
    if 0 < top_k < n_tokens:
        kth = torch.topk(scores, top_k, dim=-1).values[:, -1:]  # (rows, 1)
        scores = scores.masked_fill(scores < kth, -math.inf)
    if top_p < 1:
        ordered, order = torch.sort(scores, dim=-1, descending=True)  # (rows, width)
        probs = ordered.softmax(-1)
        before = probs.cumsum(-1) - probs  # mass of the more likely tokens
        drop = before >= top_p
        drop[:, 0] = False
        scores = scores.masked_fill(drop.scatter(1, order, drop), -math.inf)
    return scores


class SeededSampler(LogitsProcessor):
    """Filtering plus Gumbel noise from each row's own generator, so greedy decoding draws from the filtered softmax
    (Gumbel-max): a row's samples depend on its seed only, not on the other rows of the batch."""

    def __init__(self, seeds: list[int], params: SamiaParams, n_tokens: int, device: torch.device):
        self.generators = [torch.Generator(device).manual_seed(s) for s in seeds]
        self.params, self.n_tokens = params, n_tokens

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        p = self.params
        scores = filter_scores(scores, temperature=float(p.temperature), top_k=int(p.top_k), top_p=float(p.top_p),
                               n_tokens=self.n_tokens)  # (rows, width)
        exp = torch.stack([torch.empty(scores.shape[1], device=scores.device).exponential_(generator=g)
                           for g in self.generators])  # (rows, width), Exp(1) draws
        return scores - exp.clamp_min(torch.finfo(exp.dtype).tiny).log()  # + Gumbel(0, 1)


def prompt_ids(lm: LanguageModel, text: str, params: SamiaParams, bos: str) -> list[int]:
    """The prompt's ids as the statistics pass would feed them under the BOS policy; an error if no room is left."""
    ids = lm._with_boundary(lm._encode(split_text(text, float(params.prefix_fraction))[0])[0], bos)
    cap = min(int(params.max_length), lm.max_length)
    if len(ids) >= cap:
        raise ValueError(f"the SaMIA prompt takes {len(ids)} tokens and max_length is {cap} (with the model's "
                         "context): no room to sample a continuation; raise max_length or lower prefix_fraction")
    return ids


def sample_outputs(lm: LanguageModel, prompts: dict[str, list[int]], params: SamiaParams) -> dict[str, list[str]]:
    """Text → its `n_samples` outputs (prompt + continuation, specials skipped), for texts keyed to their prompt ids.

    Texts with prompts of equal length share `generate` calls (no padding, so no row sees another's);
    the calls hold ≤ `SAMPLE_TOKENS` tokens, halved on a CUDA out-of-memory error.
    """
    cap, n = min(int(params.max_length), lm.max_length), int(params.n_samples)
    by_length: dict[int, list[str]] = {}
    for text, ids in prompts.items():
        by_length.setdefault(len(ids), []).append(text)
    out: dict[str, list[str]] = {}
    per_call = max(1, SAMPLE_TOKENS // (cap * n))  # texts per call
    for length in sorted(by_length):
        group = sorted(by_length[length], key=text_sha256)
        done = 0
        while done < len(group):
            chunk = group[done:done + per_call]
            try:
                out.update(zip(chunk, _generate(lm, [prompts[t] for t in chunk], chunk, params, cap)))
                done += len(chunk)
            except torch.cuda.OutOfMemoryError:
                if per_call == 1:
                    raise
                torch.cuda.empty_cache()
                per_call //= 2
    return out


def _generate(lm: LanguageModel, ids: list[list[int]], texts: list[str], params: SamiaParams, cap: int) -> list[list[str]]:
    """One `generate` call: every text's prompt repeated `n_samples` times, one seeded sampler row each."""
    n, tok = int(params.n_samples), lm.tokenizer
    input_ids = torch.tensor(ids, device=lm.device).repeat_interleave(n, dim=0)  # (texts·n, prompt)
    sampler = SeededSampler([s for t in texts for s in sample_seeds(params.seed, t, n)], params, len(tok), lm.device)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.inference_mode():
        out = lm.model.generate(  # (texts·n, ≤ cap)
            input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False, num_beams=1,
            max_new_tokens=cap - input_ids.shape[1], logits_processor=LogitsProcessorList([sampler]), pad_token_id=pad)
    decoded = tok.batch_decode(out, skip_special_tokens=True)
    return [decoded[i * n:(i + 1) * n] for i in range(len(texts))]


def prepare(stats: list[TokenStats], params: SamiaParams, *, lm: LanguageModel) -> list[list[str] | None]:
    """Every text's continuations sampled in shared `generate` calls; a text's context is its outputs (None where its
    words or prompt cannot be sampled: `samia` then says why)."""
    prompts: dict[str, dict[str, list[int]]] = {}  # BOS policy → text → prompt ids
    for s in stats:
        try:
            prompts.setdefault(s.bos_policy, {})[s.text] = prompt_ids(lm, s.text, params, s.bos_policy)
        except ValueError:
            continue
    found = {(bos, t): o for bos, group in prompts.items() for t, o in sample_outputs(lm, group, params).items()}
    return [found.get((s.bos_policy, s.text)) for s in stats]


@register("samia", access=AccessNeeds(generation=True, why="continuations sampled from the text's first half"),
          lesson=510, paper=Paper("Kaneko et al.", 2024, "https://arxiv.org/abs/2404.11262"),
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
    outputs = context if context is not None else sample_outputs(
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
