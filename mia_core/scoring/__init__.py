"""Scoring front doors: `score` for one `TokenStats`, `score_texts` for a list of texts and methods.

One path behind both: the suppliers make what the methods `need` (`suppliers.SUPPLIERS`, one per need, every extra
model pass batched over all texts at once), each method's `prepare` hook sees all texts and returns one context per
text, then every text is scored with its inputs and context. Where the target's statistics are computed is a backend
(`backends.STATS_BACKENDS`): "local" here; `mia_core.runs` adds "ray" (so this package never imports Ray).
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import pandas as pd

from ..api import MethodSpec, Score, TokenStats, get_method, methods_allowed
from ..model.language_model import LanguageModel
from ..model.policy import StatsPolicy
from .backends import STATS_BACKENDS, StatsBackend, check_backend, register_backend, text_stats
from .stream import Stream
from .suppliers import GIVEN_NEEDS, INPUT_KWARGS, PerText, Request, helper_inputs, reference_stats, supply


def score(name: str, stats: TokenStats, **kwargs: Any) -> Score:
    """Score one text's statistics with a registered method.

    Inputs by need: `lowercase` takes `lowercase_stats=` or `lm=` (the target model, to compute
    them); `ref` takes `ref_stats=` or `ref_model=`; `ez_mia` and `wbc` take `ref_model=` (sharing the
    target's tokenizer) with `lm=`, or `ref_same_token_stats=`; `dc_pdd` takes `freq=` (a `FrequencyTable` or
    its path). ReCaLL and Con-ReCall take `shots_nonmembers=` / `shots_members=` (known texts) and
    `lm=`; CAMIA takes `reference=` (a `ReferenceStats`, or known non-member texts with `lm=`).
    Remaining keyword arguments are the method's parameters (e.g. `k=0.2`).
    """
    spec = get_method(name)
    given = {key: kwargs.pop(key) for key in INPUT_KWARGS if key in kwargs}
    params = spec.make_params(**kwargs)
    policy = stats.policies
    given.update(helper_inputs([spec], given, [stats.text]))
    req = Request(given.pop("lm", None), [stats.text], [stats], policy["bos"], policy["long_text"], [spec], given)
    return _score_all(spec, params, req, supply(req), {}, numbered=False)[0]


def score_texts(
    lm: LanguageModel,
    texts: Sequence[str],
    methods: Sequence[str],
    k: float | None = None,
    bos: str = "auto",
    *,
    progress: Callable[[int, int], None] | None = None,
    long_text: str = "sliding",
    stats: Sequence[TokenStats] | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    ray_options: Any = None,
    **params: Any,
) -> pd.DataFrame:
    """Score every text with every method: one row per text, one column per method (higher = member).

    `params` holds method parameters (e.g. `a=0.01` for dc_pdd) and inputs (`ref_model=`, `freq=`, `classifier=`,
    the helper texts `shots_nonmembers=`, `shots_members=`, `reference=`, which must not be scored texts);
    `k`, when given, goes to every method that has a `k` (else each keeps its own default: 0.2 for
    min_k, min_k_pp and gap_k, 0.4 for surp). Extra model passes run batched over all texts.
    `stats` : the texts' statistics when already computed (e.g. by `text_stats`), else computed here.
    `backend` : "local", or "ray" to compute the target model's statistics (and the lowercased pass)
    on Ray model actors (`ray_address` picks the cluster, `ray_options` is a `mia_core.runs.ray_driver.RayOptions`);
    the methods run here either way, so every method works unchanged (a reference model's pass and
    methods' own extra passes stay local).
    """
    return _scored(lm, texts, methods, k, bos, progress=progress, long_text=long_text, stats=stats, backend=backend,
                   ray_address=ray_address, ray_options=ray_options, **params)[0]


def _scored(lm, texts, methods, k, bos, *, progress, long_text, stats, backend, ray_address, ray_options,
            texts_done: Callable[[int], None] | None = None, first_text: int = 0,
            **params) -> tuple[pd.DataFrame, list[TokenStats]]:
    """`score_texts`, and the statistics it scored (a text's error names its number plus `first_text`).

    Methods that read only the statistics and inputs the caller gave (no `prepare` hook, no model pass of their
    own) are scored batch by batch while the target's statistics stream in (`stream.Stream`: one vectorised pass per
    batch where a method has a batch form), so on a GPU their work overlaps the next batch; every other method is
    scored once all statistics are back. Scores and errors are the same either
    way: a text's error is raised after the pass, the first by method order then text number; a missing or bad
    input is raised where it was before (then nothing streams, and every method is scored after the pass).
    """
    specs = [get_method(m) for m in dict.fromkeys(methods)]  # each method once, in the given order
    refused = methods_allowed(lm, [s.name for s in specs]).refused if lm is not None else {}
    if refused:  # what the model does not offer is refused with the reason, never approximated
        raise ValueError(" ".join(refused.values()))
    StatsPolicy(bos, long_text)  # both policies checked before any model pass
    given = {key: params.pop(key) for key in INPUT_KWARGS if key in params and key != "lm"}
    method_params = _method_params(specs, params, k)
    texts = [str(t) for t in texts]
    given.update(helper_inputs(specs, given, texts))
    check_backend(backend)
    where = {"backend": backend, "ray_address": ray_address, "ray_options": ray_options}
    if stats is not None:
        stats = _given_stats(stats, texts, bos)
    streamed = [s for s in specs if s.prepare is None and set(s.needs) <= {"stats", *GIVEN_NEEDS}]
    try:
        early = supply(Request(lm, texts, [], bos, long_text, streamed, given, where, progress, first_text))
    except (TypeError, ValueError, OSError):  # raised below by `supply`, in the order of every method's needs
        streamed, early = [], {}
    stream, reported = Stream(streamed, method_params, early, len(texts), first_text), []

    def batch_back(indices, batch) -> None:
        stream.score_batch(indices, batch)
        reported.append(len(indices))
        if texts_done is not None:
            texts_done(len(indices))

    if stats is None and backend != "local" and any("lowercase_stats" in s.needs for s in specs):
        both = text_stats(lm, texts + [t.lower() for t in texts], bos=bos, long_text=long_text, progress=progress,
                          **where)  # one pass of the actors (each loads the model) for both
        stats, given["lowercase_stats"] = both[:len(texts)], both[len(texts):]
    elif stats is None:
        stats = text_stats(lm, texts, bos=bos, long_text=long_text, progress=progress, on_batch=batch_back, **where)
    if texts_done is not None and not reported:
        texts_done(len(texts))  # statistics given, or computed with the lower-case copies: all back at once
    req = Request(lm, texts, list(stats), bos, long_text, specs, given, where, progress, first_text)
    supplied = supply(req, early)
    derived: dict = {}  # work two methods' prepare hooks share, for this call only
    columns = {}
    for spec in specs:
        if spec.name in stream.scores:
            columns[spec.name] = stream.values(spec, req.stats)
        else:
            columns[spec.name] = [s.value for s in _score_all(spec, method_params[spec.name], req, supplied, derived)]
    return pd.DataFrame(columns), list(stats)


def _method_params(specs: list[MethodSpec], params: dict, k: float | None) -> dict[str, Any]:
    """Each method's parameters, validated by their dataclass before any model pass."""
    unused = set(params) - {name for s in specs for name in s.param_names}
    if unused:
        raise TypeError(f"parameters {sorted(unused)} are not used by methods {[s.name for s in specs]}")
    given = {**params, **({} if k is None else {"k": k})}
    return {s.name: s.make_params(**{n: v for n, v in given.items() if n in s.param_names}) for s in specs}


def _score_all(spec: MethodSpec, params: Any, req: Request, supplied: dict[str, Any], derived: dict, *,
               numbered: bool = True) -> list[Score]:
    """Every text scored by one method: its `prepare` hook over all texts (one context each), then text by text
    (a text's error names its number when `numbered`). A hook that takes `derived` gets the call's dict of work
    methods share (ReCaLL's and Con-ReCall's non-member prefix passes), which ends with the call."""
    shared = {n: v for n, v in supplied.items() if n in spec.needs and not isinstance(v, PerText)}
    contexts: list = [None] * len(req.stats)
    if spec.prepare is not None:  # the method's batched work over all texts (e.g. GDS: one backward per batch)
        live = [i for i, st in enumerate(req.stats) if st.n_scored > 0]  # empty texts: the scorer says why
        extra = {"derived": derived} if "derived" in inspect.signature(spec.prepare).parameters else {}
        found = list(spec.prepare([req.stats[i] for i in live], params, **shared, **extra))
        for i, context in zip(live, found):
            contexts[i] = context
    out = []
    for i, st in enumerate(req.stats):
        inputs = {**shared, **{n: v.values[i] for n, v in supplied.items() if n in spec.needs and isinstance(v, PerText)}}
        if spec.prepare is not None:
            inputs["context"] = contexts[i]
        try:
            out.append(spec.fn(st, params, **inputs))
        except ValueError as err:
            if not numbered:
                raise
            raise ValueError(f"text {i + req.first_text}: {err}") from None
    return out


def score_table(lm: LanguageModel, texts: Sequence[str], methods: Sequence[str], *, k: float | None = None, bos: str = "auto",
                long_text: str = "sliding", progress: Callable[[int, int], None] | None = None, backend: str = "local",
                ray_address: str | None = None, ray_options: Any = None,
                texts_done: Callable[[int], None] | None = None, first_text: int = 0, **params: Any) -> pd.DataFrame:
    """`score_texts` with each text's scored-token count and long-text handling in front (columns n_tokens, long_text).

    texts_done : called with how many more texts' statistics are back, batch by batch (for "40 of 120 texts").
    first_text : the number of the first text in errors ("text 12: …"), when these texts are a part of more
        (`parts.score_parts`).
    """
    df, stats = _scored(lm, texts, methods, k, bos, progress=progress, long_text=long_text, stats=None, backend=backend,
                        ray_address=ray_address, ray_options=ray_options, texts_done=texts_done,
                        first_text=first_text, **params)
    df.insert(0, "n_tokens", [s.n_scored for s in stats])
    df.insert(1, "long_text", [s.long_text for s in stats])
    return df


def _given_stats(stats: Sequence[TokenStats], texts: list[str], bos: str) -> list[TokenStats]:
    """Statistics passed in, checked to be those of these texts under this BOS policy."""
    stats = list(stats)
    if len(stats) != len(texts) or any(s.text != t for s, t in zip(stats, texts)):
        raise ValueError("stats= must hold the statistics of the given texts, in the same order")
    if any(s.bos_policy != bos for s in stats):
        raise ValueError(f"stats= were computed with another BOS policy than bos={bos!r}")
    return stats


__all__ = ["INPUT_KWARGS", "STATS_BACKENDS", "StatsBackend", "check_backend", "reference_stats", "register_backend",
           "score", "score_table", "score_texts", "text_stats"]
