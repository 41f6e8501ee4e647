"""SimMIA and SimMIA* in process (Yi & Li 2026, arXiv 2601.11314; METHODS-API.md §20; docs/methods.md, "simmia").

Black box: only sampled text is used. For each context c ∈ {"", P} (P: known non-members) and each position
k = 1…L−1 of the text's words, the model samples N next words after c + w₀…w_{k−1}; the scoring is the chat API
procedure's (`mia_core.blackbox.simmia`): SimMIA* compares the label word's sampled frequency with and without P,
SimMIA the samples' embedding similarity to it; `score = −mean_k r_k`, higher = member. Per token: the r_k of the
word the token is in.

The authors' HF backend: `generate(max_new_tokens=3, do_sample=True, top_k=20)`, temperature 1.0, each prefix
tokenized alone. Deviations: the prompt follows the text's BOS policy (theirs: the tokenizer's own special tokens);
draws come from the shared seeded sampler (`mia_core.model.sampling`), seeded per (seed, context, position, text) and
batched across prompts of equal length (theirs: the global RNG, one prompt at a time); P's texts each end with a
blank line under mode "ours" (theirs joins them with ""); a prompt longer than the model's context is an error.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...api import AccessNeeds, Paper, Score, TokenStats, TokenView, register
from ...blackbox.simmia import WordEmbedder, embedder, nonmember_prefix, score_positions, token_ratios
from ...blackbox.simmia_words import word_tokenize
from ...deferred import deferred
from ..helper_texts import as_helper_texts
from .params import NEW_TOKENS, SimMiaParams, SimMiaStarParams

if TYPE_CHECKING:  # the sampler (torch, transformers) loads when a text is scored, not when the method is registered
    from ...model.language_model import LanguageModel
    from . import sampling
else:
    sampling = deferred(f"{__name__}.sampling")

PAPER = Paper("Yi & Li", 2026, "https://arxiv.org/abs/2601.11314", "Membership Inference on LLMs in the Wild",
              "arXiv:2601.11314")
ACCESS = AccessNeeds(token_logprob=False, generation=True,
                     why="next words sampled after every prefix of the text, with and without known non-members first")
FAILS = ("It needs known non-members of the same kind for its prefix and 2(L−1)·N sampled next words per text of L "
         "words. The paper's text was not read: every detail comes from the authors' code (METHODS-API.md §20).")


@dataclass(frozen=True)
class Drawn:
    """One text's words and, per position k = 1…L−1, its samples without and with the non-member prefix."""

    words: list[str]
    samples: list[list[str]]
    prefix_samples: list[list[str]]


def prompts_for(lm: LanguageModel, text: str, prefix: str, bos: str) -> tuple[list[str], dict[str, list[int]]]:
    """(words, prompt key → ids) of a text's 2(L−1) prompts; a ValueError when it cannot be sampled."""
    words = word_tokenize(text)
    if len(words) < 2:
        raise ValueError(f"SimMIA scores the words after the first: this text has {len(words)} word(s)")
    prompts = {}
    for c, context in enumerate(("", prefix)):
        for k in range(1, len(words)):
            prompts[f"{c}|{k}|{text}"] = lm.fed_ids(context + "".join(words[:k]), bos)
    longest = max(len(ids) for ids in prompts.values())
    if longest + NEW_TOKENS > lm.max_length:
        raise ValueError(f"the non-member prefix and the text take {longest} tokens and the model's context is "
                         f"{lm.max_length}: no room for {NEW_TOKENS} more; use fewer or shorter non-members (n_shots)")
    return words, prompts


def draw(lm: LanguageModel, texts: list[tuple[str, str]], prefix: str, params: SimMiaStarParams, *,
         strict: bool = False) -> dict[tuple[str, str], Drawn]:
    """(BOS policy, text) → its samples, every prompt of a policy in shared `generate` calls; a text that cannot be
    sampled is left out (`strict`: its ValueError is raised)."""
    out = {}
    for bos in sorted({b for b, _ in texts}):
        planned, prompts = {}, {}
        for _, text in sorted(t for t in texts if t[0] == bos):
            try:
                planned[text], found = prompts_for(lm, text, prefix, bos)
            except ValueError:
                if strict:
                    raise
                continue
            prompts.update(found)
        sampled = sampling.sample_next_words(lm, prompts, params) if prompts else {}
        for text, words in planned.items():
            rows = [[sampled[f"{c}|{k}|{text}"] for k in range(1, len(words))] for c in (0, 1)]
            out[bos, text] = Drawn(words, *rows)
    return out


def _prefix(shots_nonmembers, params: SimMiaStarParams) -> tuple[str, int, str]:
    """(P, shots used, their source)."""
    helpers = as_helper_texts(shots_nonmembers, "shots_nonmembers")
    shots = helpers.texts[:params.n_shots]
    return nonmember_prefix(shots, params.mode), len(shots), helpers.source


def prepare(stats: list[TokenStats], params: SimMiaStarParams, *, lm: LanguageModel, shots_nonmembers,
            derived: dict | None = None) -> list[Drawn | None]:
    """Every text's samples in shared `generate` calls, once per scoring call for SimMIA and SimMIA* together
    (`derived`); None for a text that cannot be sampled (its scorer then says why)."""
    prefix = _prefix(shots_nonmembers, params)[0]
    texts = [(s.bos_policy, s.text) for s in stats]
    key = ("simmia", lm.fingerprint, prefix, tuple(texts), int(params.n_samples), int(params.seed),
           float(params.temperature), int(params.top_k))
    if derived is None or key not in derived:
        found = draw(lm, texts, prefix, params)
        if derived is None:
            return [found.get(t) for t in texts]
        derived[key] = found
    return [derived[key].get(t) for t in texts]


def prepare_soft(stats: list[TokenStats], params: SimMiaParams, *, lm: LanguageModel, shots_nonmembers,
                 derived: dict | None = None) -> list[Drawn | None]:
    """`prepare` once the embedder is found (a missing one is said before any sampling)."""
    embedder(params.embedding)
    return prepare(stats, params, lm=lm, shots_nonmembers=shots_nonmembers, derived=derived)


def scored(stats: TokenStats, params: SimMiaStarParams, lm: LanguageModel, shots_nonmembers, context: Drawn | None,
           embed: WordEmbedder | None) -> Score:
    """SimMIA (with an embedder) or SimMIA* (without) of one text from its samples (`context`, else drawn now)."""
    prefix, n_shots, source = _prefix(shots_nonmembers, params)
    drawn = context or draw(lm, [(stats.bos_policy, stats.text)], prefix, params, strict=True)[
        stats.bos_policy, stats.text]
    result = score_positions(drawn.words, drawn.samples, drawn.prefix_samples, embed=embed, mode=params.mode,
                             exact_match_number=bool(getattr(params, "exact_match_number", False)))
    key = "r_star" if embed is None else "r"
    token_scores, selected = token_ratios(result.positions, stats.offsets, key)
    details = {"variant": "SimMIA*" if embed is None else "SimMIA",
               "embedding": None if embed is None else {"name": embed.name, "sha256": embed.sha256},
               "samples_per_position": int(params.n_samples), "n_nonmembers": n_shots, "nonmember_source": source,
               "positions": result.positions}
    return Score(result.simmia_star if embed is None else result.simmia, token_scores, selected, details)


VIEW = TokenView("r_k of the word each token is in: how much of the word's sampled predictability the non-member "
                 "prefix keeps (1 = all of it)", "the tokens of the scored words (every word but the first)",
                 low="the prefix cost this word its predictability, as it does members: member-like",
                 high="the prefix kept or raised this word's predictability: less member-like",
                 member_high=False, centre=1.0, token_range=(0.0, 2.0))
COST = "2(L−1)·N sampled next words of 3 tokens (L words, N samples)"


def _passes(params: SimMiaStarParams) -> float:
    """Passes over a text's tokens: 2 contexts × N samples × L prompts of half the text on average ≈ N·L passes,
    counted at L = 32 words (a WikiMIA-32 text)."""
    return params.n_samples * 32


@register("simmia_star", access=ACCESS, view=VIEW, lesson=530, paper=PAPER, fails=FAILS, label="SimMIA*",
          params=SimMiaStarParams, needs=("stats", "lm", "shots_nonmembers"), prepare=prepare, cost=COST,
          extra_passes=_passes,
          reading=lambda v: f"after a prefix of known non-members, the model's sampled next words hit the text's own "
                            f"word {-v:.2f}× as often as without it, on average; a prefix costs members more.",
          formula=r"\mathrm{score}(x) = -\frac{1}{L-1}\sum_{k=1}^{L-1}\frac{\hat f^{P}_k(w_k)}{\hat f_k(w_k)},\ "
                  r"\hat f_k(w) = \frac{c_k(w)+1}{N+|W_k|+1}",
          idea="Black box: sample the next word after every prefix of the text, with and without known non-members "
               "in front; a model that saw the text predicts its words, and the non-members disturb that more.",
          summary="Black box (SimMIA*, the embedding-free variant): −mean ratio of the text's words' sampled "
                  "frequencies after a non-member prefix to without it.")
def simmia_star(stats: TokenStats, params: SimMiaStarParams, *, lm: LanguageModel, shots_nonmembers,
                context: Drawn | None) -> Score:
    """SimMIA*: −mean_k f^P_k / f_k of the label words (smoothed); details: every position's samples."""
    return scored(stats, params, lm, shots_nonmembers, context, None)


@register("simmia", access=ACCESS, view=VIEW, lesson=540, paper=PAPER, fails=FAILS, label="SimMIA",
          params=SimMiaParams, needs=("stats", "lm", "shots_nonmembers"), prepare=prepare_soft, cost=COST,
          extra_passes=_passes,
          reading=lambda v: f"after a prefix of known non-members, the model's sampled next words are {-v:.2f}× as "
                            "close in meaning to the text's own words as without it, on average; a prefix costs "
                            "members more.",
          formula=r"\mathrm{score}(x) = -\frac{1}{L-1}\sum_{k=1}^{L-1}\frac{S^{P}_k}{S_k + 10^{-11}},\ "
                  r"S_k = \sum_{w} \hat f_k(w)\,\frac{\cos(e(w_k), e(w)) + 1}{2}",
          idea="SimMIA* with meaning instead of exact words: sampled next words count by their embedding similarity "
               "to the text's word, with and without known non-members in front.",
          summary="Black box: −mean ratio of the sampled next words' similarity to the text's words after a "
                  "non-member prefix to without it (all-MiniLM-L6-v2 embeddings).")
def simmia(stats: TokenStats, params: SimMiaParams, *, lm: LanguageModel, shots_nonmembers,
           context: Drawn | None) -> Score:
    """SimMIA: −mean_k S^P_k / (S_k + 1e-11) with the registered embedder `params.embedding`."""
    return scored(stats, params, lm, shots_nonmembers, context, embedder(params.embedding))
