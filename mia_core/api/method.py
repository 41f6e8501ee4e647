"""`MethodSpec`: everything the project knows about a method, and the vocabularies it is declared in —
what it needs supplied (`NEEDS`), what it reads of the model (`AccessNeeds`), how its tokens read (`TokenView`)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from .access import AccessNeeds
from .params import ParamInfo, param_infos
from .score import Score

#: What a method may need beyond the target's statistics; each has one supplier (`mia_core.scoring.SUPPLIERS`).
NEEDS = {
    "stats": "per-token statistics of the target model (one forward pass)",
    "lowercase_stats": "a second pass of the target model on the lowercased text",
    "ref_stats": "statistics of the text under a reference model (`ref_model=`)",
    "ref_same_token_stats": "statistics of a reference model sharing the target's tokenizer, run on the target's own "
                            "token ids (`ref_model=`)",
    "freq": "a token-frequency table of a reference corpus (`freq=`)",
    "lm": "further passes of the target model itself (`lm=`)",
    "classifier": "a classifier fitted on labelled member/non-member data (`classifier=`)",
    "shots_nonmembers": "known non-member texts put in front of the text as a prefix (`shots_nonmembers=`; never "
                        "scored texts)",
    "shots_members": "known member texts put in front of the text as a second prefix (`shots_members=`; never "
                     "scored texts)",
    "reference": "a reference population of known non-members of the same kind (`reference=`; never scored texts)",
}

#: Needs the target model alone meets: its statistics, passes on texts of a method's making, the lowercased text.
MODEL_NEEDS = ("stats", "lm", "lowercase_stats")

#: Needs a reference model meets (`ref_model=`, the CLI's `--ref-model`).
REF_NEEDS = ("ref_stats", "ref_same_token_stats")

#: Needs met by helper texts: known members or non-members a method uses as context or as a reference.
HELPER_NEEDS = ("shots_nonmembers", "shots_members", "reference")

#: Short words for what a need brings beyond the model's access, for method lists.
NEED_WORDS = {"lowercase_stats": "a lowercased pass", "ref_stats": "extra model",
              "ref_same_token_stats": "extra model (same tokenizer)", "freq": "frequency table",
              "classifier": "labelled training data", "shots_nonmembers": "known non-members",
              "shots_members": "known members", "reference": "known non-members"}


@dataclass(frozen=True)
class TokenView:
    """How a method's per-token scores read on a heatmap: legend words, which end is member-like, the centre.

    centre : the natural zero of its token scores, where the diverging colours meet (None: the midpoint of the
        scale in use).
    token_range : (low, high) of the fixed colour scale, so the same token score gets the same colour in every
        text (None: no fixed range; the heatmap scales on the text or a reference set). The ranges in use come from
        60 demo-wiki texts under SmolLM2-135M (5th / 50th / 95th percentiles): log p −9.0 / −1.9 / −0.01 → (−6, 0),
        its midpoint −3 nats (p ≈ 5%) about a small model's mean token loss on prose; Min-K%++ z −2.6 / 0.19 /
        0.88 → (−3, 1) around 0; Gap-K% ≤ 0 (−3.3 / −0.29 / 0) → (−4, 0); ReCaLL's change of log p → (−2, 2).
    member_high : whether high token scores are the member-like ones (drawn red); False for ReCaLL and Con-ReCall.
    """

    colour: str = "the method's score of each token"
    outlined: str = "the tokens that enter the sequence score"
    low: str = "less member-like"
    high: str = "more member-like"
    member_high: bool = True
    centre: float | None = None
    token_range: tuple[float, float] | None = None


#: The legend's words for the many methods whose token score is the token's log-prob.
LOGP = "log p of each token under the model"
#: The fixed colour range of log-prob token scores (`TokenView.token_range`).
LOGP_RANGE = (-6.0, 0.0)


#: The stages methods are taught in on Learn (docs/methods.md, "Teaching order"): a method's `lesson` number lies in
#: its stage's hundred (loss 110, zlib 120, Min-K% 210, …), so the order reads from the registry.
LESSON_STAGES = {1: "the text's likelihood", 2: "which tokens count", 3: "more passes of the model, or another model",
                 4: "known texts beside the text", 5: "sampled text only", 6: "gradients and labelled data"}


@dataclass(frozen=True)
class Paper:
    """The paper a method comes from: each field checked against the paper's own abstract page (arXiv, ACL
    Anthology, OpenReview) or the venue's page, nothing added from memory; a field that could not be confirmed stays
    empty (tests/methods/test_papers.py names the gaps).

    authors : as cited ("Shi, Ajith, … & Zettlemoyer", or "Xie et al.").
    year : of the version cited (None where no dated version could be confirmed).
    link : the paper's arXiv abstract page, ACL Anthology or venue page; None where none was found.
    title : exactly as the paper states it ("" where not confirmed).
    venue : where it was published ("ICLR 2024"); a preprint's arXiv identifier ("arXiv:2404.11262") where it has no
        confirmed venue; "" where neither is known.
    """

    authors: str
    year: int | None
    link: str | None = None
    title: str = ""
    venue: str = ""

    def cite(self) -> str:
        """The citation on one line, "Authors (year). Title. Venue." (no link). Each part ends with one mark:
        authors ending in "et al." or a title ending in "?" or "." get no second period."""
        parts = [self.authors + ("" if self.year is None else f" ({self.year})"), self.title, self.venue]
        return " ".join(part if part.endswith((".", "?", "!")) else part + "."
                        for part in (" ".join(part.split()) for part in parts) if part)


@dataclass(frozen=True)
class Supervised:
    """How a supervised method learns from labelled texts.

    fits : the need its fitted value meets (e.g. "classifier").
    fit : `fit(lm, texts, labels, params, *, train, split, seed, bos, batch_tokens, progress, score_all)
        -> (value, scores | None)`: fits on the rows `train` of labelled texts (never the others' labels), keeps `split`
        (the split's record) in what it fits; with `score_all` it also returns every text's score from the same passes.
        The value has `describe()`, `trained_on(text)` and `save(folder)`.
    load : `load(path) -> value`: a fitted value saved earlier (its `save(folder)` wrote it), for the need's supplier.
    """

    fits: str
    fit: Callable[..., Any]
    load: Callable[[Any], Any]

    def resolve(self, value: Any) -> Any:
        """A fitted value given as such, or as the folder it was saved in (then loaded)."""
        return self.load(value) if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__") else value


@dataclass(frozen=True)
class MethodSpec:
    """A registered method: its scorer and parameters, what it needs, and how people are shown it.

    fn : `fn(stats, params, **inputs) -> Score`; with a `prepare` hook also `context=` (that text's entry).
    reading : value → one plain-language sentence on a sequence score (no caveat; `registry.reading` adds it).
    formula, idea : the LaTeX formula and the one-line intuition shown on the Learn page.
    access : what it reads of the model (`methods_allowed` compares it with what a model offers).
    view : how its token scores read on a heatmap.
    prepare : optional batched hook `prepare(stats_list, params, **inputs) -> contexts`, run once over all texts
        before they are scored one by one; it returns one context per text (e.g. that text's gradient norms),
        handed to `fn` as `context=` — nothing is kept between runs. A hook with a `derived` parameter also gets the
        scoring call's dict of work two methods share (ReCaLL's and Con-ReCall's prefix passes); it ends with the call.
    supervised : how a supervised method learns from labelled texts (None for the others).
    extra_passes : model passes over a text's tokens it adds to the statistics pass, given its parameters (read by
        attribute): what the dashboard's cost estimate counts (a backward pass counts as two forward ones).
    paper, fails, lesson : where it comes from, when it fails (one or two sentences from the literature or the
        spec), and its place in the teaching order (`LESSON_STAGES`); shown on Learn.
    batch : optional batch form `batch(stats_batch, params, **inputs) -> (b,) float64 values` of a method without a
        `prepare` hook: the values `fn` gives text by text, in one vectorised pass over a `StatsBatch` (texts with at
        least one scored token; `mia_core.score_texts` scores batches with it, `fn` stays for single texts and errors).
    """

    name: str
    fn: Callable[..., Score]
    params: type
    needs: tuple[str, ...]
    label: str
    summary: str
    token_level: bool
    access: AccessNeeds
    cost: str
    reading: Callable[[float], str]
    formula: str
    idea: str
    view: TokenView
    prepare: Callable[..., Any] | None = None
    supervised: Supervised | None = None
    extra_passes: Callable[[Any], float] = lambda params: 0
    paper: Paper | None = None
    fails: str = ""
    lesson: int = 0
    batch: Callable[..., Any] | None = None

    @property
    def stage(self) -> str:
        """The teaching stage its `lesson` lies in."""
        return LESSON_STAGES.get(self.lesson // 100, "")

    @property
    def centre(self) -> float | None:
        return self.view.centre

    @property
    def token_range(self) -> tuple[float, float] | None:
        return self.view.token_range

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.params))

    @property
    def param_infos(self) -> list[ParamInfo]:
        """Its parameters with their help and bounds (for `--param` help and the pages' widgets)."""
        return param_infos(self.params)

    @property
    def stats_only(self) -> bool:
        """Needs nothing but the target's statistics (cheap to redraw; usable per snippet, chunk or window)."""
        return self.needs == ("stats",)

    def access_words(self) -> list[str]:
        """What it reads of the model and what else it needs, in short words for method lists."""
        return self.access.words() + list(dict.fromkeys(NEED_WORDS[n] for n in self.needs if n in NEED_WORDS))

    def make_params(self, **values: Any):
        """Build the parameter dataclass (which validates itself), rejecting names the method does not take."""
        unknown = set(values) - set(self.param_names)
        if unknown:
            raise TypeError(f"method {self.name!r} takes parameters {self.param_names} (got {sorted(unknown)})")
        return self.params(**values)
