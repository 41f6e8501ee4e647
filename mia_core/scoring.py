"""Scoring front doors: `score` for one `TokenStats`, `score_texts` for a list of texts and methods.

They supply what each method `needs` (a lowercased pass, a reference model's statistics, a
frequency table), batching every extra model pass over all texts at once, and let a method's own
`prepare` hook see all texts before they are scored one by one. Where the target's statistics are
computed is a backend looked up in `STATS_BACKENDS`: "local" here; `mia_core.runs` adds "ray"
(backends live there, so this module never imports Ray).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from .methods import Score, get_method
from .methods.dc_pdd.frequency import FrequencyTable, load_frequency_table
from .methods.helper_texts import ROLES, ReferenceStats, as_helper_texts, check_disjoint
from .api import HELPER_NEEDS, TokenStats
from .model.identity import tokenizer_fingerprint
from .model.language_model import LanguageModel
from .model.policy import StatsPolicy
from .names import check_choice

#: A backend: fn(lm, texts, *, bos, long_text, progress, address, options) -> the texts' `TokenStats`, in order.
StatsBackend = Callable[..., list[TokenStats]]


def _local_stats(lm: LanguageModel, texts: Sequence[str], *, bos: str, long_text: str,
                 progress: Callable[[int, int], None] | None, address=None, options=None) -> list[TokenStats]:
    """This process: `lm.token_stats` (the backend options do not apply)."""
    return lm.token_stats(texts, bos=bos, progress=progress, long_text=long_text)


#: Where the target's statistics are computed, by name; `mia_core.runs.backends` registers "ray".
STATS_BACKENDS: dict[str, StatsBackend] = {"local": _local_stats}


def register_backend(name: str, backend: StatsBackend) -> None:
    """Make `backend` selectable as `score_texts(..., backend=name)`."""
    STATS_BACKENDS[name] = backend


def check_backend(backend: str) -> None:
    """ValueError naming the closest backend unless `backend` is registered."""
    check_choice("backend", backend, STATS_BACKENDS)


#: Keyword arguments that supply a method's inputs rather than its parameters.
INPUT_KWARGS = ("lm", "lowercase_stats", "ref_model", "ref_stats", "freq", "classifier", *HELPER_NEEDS)


def score(name: str, stats: TokenStats, **kwargs: Any) -> Score:
    """Score one text's statistics with a registered method.

    Inputs by need: `lowercase` takes `lowercase_stats=` or `lm=` (the target model, to compute
    them); `ref` takes `ref_stats=` or `ref_model=`; `dc_pdd` takes `freq=` (a `FrequencyTable` or
    its path). ReCaLL and Con-ReCall take `shots_nonmembers=` / `shots_members=` (known texts) and
    `lm=`; CAMIA takes `reference=` (a `ReferenceStats`, or known non-member texts with `lm=`).
    Remaining keyword arguments are the method's parameters (e.g. `k=0.2`).
    """
    spec = get_method(name)
    inputs = _inputs_for_one(spec.needs, stats, kwargs)
    return spec.fn(stats, spec.make_params(**kwargs), **inputs)


def _inputs_for_one(needs: tuple[str, ...], stats: TokenStats, kwargs: dict) -> dict:
    """Pop the inputs a method needs out of kwargs, computing statistics where a model was given."""
    lm, ref_model = kwargs.pop("lm", None), kwargs.pop("ref_model", None)
    given = {key: kwargs.pop(key, None) for key in ("lowercase_stats", "ref_stats", "freq", "classifier")}
    policy = stats.policies
    inputs = {}
    if "lowercase_stats" in needs:
        inputs["lowercase_stats"] = given["lowercase_stats"] or _require(lm, "lowercase", "lowercase_stats= or lm=").token_stats(
            [stats.text.lower()], **policy)[0]
    if "ref_stats" in needs:
        inputs["ref_stats"] = given["ref_stats"] or _require(ref_model, "ref", "ref_stats= or ref_model=").token_stats(
            [stats.text], **policy)[0]
    if "freq" in needs:
        inputs["freq"] = _frequency_table(_require(given["freq"], "dc_pdd", "freq="), None)
    if "lm" in needs:
        inputs["lm"] = _require(lm, "this method", "lm= (the target model, for its extra passes)")
    if "classifier" in needs:
        inputs["classifier"] = _require(given["classifier"], "this method", "classifier= (fitted on labelled data)")
    helpers = {role: kwargs.pop(role, None) for role in HELPER_NEEDS}
    for role in (r for r in HELPER_NEEDS if r in needs):
        value = _require(helpers[role], "this method", f"{role}= ({ROLES[role]})")
        if role == "reference":
            inputs[role] = value if isinstance(value, ReferenceStats) else reference_stats(
                _require(lm, "this method", "lm= (to score the reference texts)"), value, **policy)
        else:
            inputs[role] = as_helper_texts(value, role)
        check_disjoint([stats.text], [inputs[role].helpers if role == "reference" else inputs[role]])
    return inputs


def reference_stats(lm: LanguageModel, texts, *, bos: str = "auto", long_text: str = "sliding", backend: str = "local",
                    ray_address: str | None = None, ray_options: Any = None) -> ReferenceStats:
    """Known non-member texts (or `HelperTexts`) with the target's statistics of each, for CAMIA's calibration."""
    helpers = as_helper_texts(texts, "reference")
    return ReferenceStats(helpers, tuple(text_stats(lm, helpers.texts, bos=bos, long_text=long_text, backend=backend,
                                                    ray_address=ray_address, ray_options=ray_options)))


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

    `params` holds method parameters (e.g. `a=0.01` for dc_pdd) and inputs (`ref_model=`, `freq=`,
    the helper texts `shots_nonmembers=`, `shots_members=`, `reference=`, which must not be scored texts);
    `k`, when given, goes to every method that has a `k` (else each keeps its own default: 0.2 for
    min_k, min_k_pp and gap_k, 0.4 for surp). Extra model passes run batched over all texts.
    `stats` : the texts' statistics when already computed (e.g. by `text_stats`), else computed here.
    `backend` : "local", or "ray" to compute the target model's statistics (and the lowercased pass)
    on Ray model actors (`ray_address` picks the cluster, `ray_options` is a `mia_core.runs.ray_driver.RayOptions`);
    the methods run here either way, so every method works unchanged (a reference model's pass and
    methods' own extra passes stay local).
    """
    methods = list(dict.fromkeys(methods))  # each method once, in the given order
    specs = [get_method(m) for m in methods]
    StatsPolicy(bos, long_text)  # both policies checked before any model pass
    needs = {n for s in specs for n in s.needs}
    ref_model, freq = params.pop("ref_model", None), params.pop("freq", None)
    classifier = params.pop("classifier", None)
    given_helpers = {role: params.pop(role, None) for role in HELPER_NEEDS}
    used = {name for s in specs for name in s.param_names}
    unused = set(params) - used
    if unused:
        raise TypeError(f"parameters {sorted(unused)} are not used by methods {list(methods)}")
    # each method's parameters, validated by their dataclass before any model pass
    given = {**params, **({} if k is None else {"k": k})}
    method_params = {s.name: s.make_params(**{n: v for n, v in given.items() if n in s.param_names})
                     for s in specs}
    texts = [str(t) for t in texts]
    helpers = _helper_inputs(specs, given_helpers, texts)
    check_backend(backend)
    where = {"bos": bos, "long_text": long_text, "progress": progress, "backend": backend, "ray_address": ray_address,
             "ray_options": ray_options}
    lowered = [t.lower() for t in texts] if "lowercase_stats" in needs else []
    extra: dict[str, list] = {}
    if stats is not None:
        stats = _given_stats(stats, texts, bos)
    elif lowered and backend == "ray":  # one pass of the actors (each loads the model) for both
        both = text_stats(lm, texts + lowered, **where)
        stats, extra["lowercase_stats"] = both[:len(texts)], both[len(texts):]
    else:
        stats = text_stats(lm, texts, **where)
    if lowered and "lowercase_stats" not in extra:
        extra["lowercase_stats"] = text_stats(lm, lowered, **where)
    if "ref_stats" in needs:
        extra["ref_stats"] = _require(ref_model, "ref", "ref_model=").token_stats(
            texts, bos=bos, progress=progress, long_text=long_text)
    table = _frequency_table(_require(freq, "dc_pdd", "freq="), lm.tokenizer) if "freq" in needs else None
    if "classifier" in needs:
        _require(classifier, next(s.name for s in specs if "classifier" in s.needs), "classifier= (fitted on labelled data)")
    if "reference" in helpers and not isinstance(helpers["reference"], ReferenceStats):
        helpers["reference"] = reference_stats(lm, helpers["reference"], bos=bos, long_text=long_text, backend=backend,
                                               ray_address=ray_address, ray_options=ray_options)
    shared = {"freq": table, "lm": lm, "classifier": classifier, **helpers}
    columns = {}
    for spec in specs:
        common = {n: shared[n] for n in spec.needs if n in shared}
        if spec.prepare is not None:  # the method's batched work over all texts (e.g. GDS: one backward per batch)
            spec.prepare([st for st in stats if st.n_scored > 0], method_params[spec.name], **common)  # empty: fn says why
        values = []
        for i, st in enumerate(stats):
            inputs = {**common, **{n: extra[n][i] for n in spec.needs if n in extra}}
            try:
                values.append(spec.fn(st, method_params[spec.name], **inputs).value)
            except ValueError as err:
                raise ValueError(f"text {i}: {err}") from None
        columns[spec.name] = values
    return pd.DataFrame(columns)


def score_table(lm: LanguageModel, texts: Sequence[str], methods: Sequence[str], *, k: float | None = None, bos: str = "auto",
                long_text: str = "sliding", progress: Callable[[int, int], None] | None = None, backend: str = "local",
                ray_address: str | None = None, ray_options: Any = None, **params: Any) -> pd.DataFrame:
    """`score_texts` with each text's scored-token count and long-text handling in front (columns n_tokens, long_text)."""
    where = {"backend": backend, "ray_address": ray_address, "ray_options": ray_options}
    stats = text_stats(lm, texts, bos=bos, long_text=long_text, progress=progress, **where)
    df = score_texts(lm, [str(t) for t in texts], methods, k=k, bos=bos, long_text=long_text, progress=progress,
                     stats=stats, **where, **params)
    df.insert(0, "n_tokens", [s.n_scored for s in stats])
    df.insert(1, "long_text", [s.long_text for s in stats])
    return df


def text_stats(
    lm: LanguageModel,
    texts: Sequence[str],
    *,
    bos: str = "auto",
    long_text: str = "sliding",
    progress: Callable[[int, int], None] | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    ray_options: Any = None,
) -> list[TokenStats]:
    """`lm.token_stats(texts)` computed in this process ("local") or by model actors on a Ray cluster ("ray")."""
    check_backend(backend)
    return STATS_BACKENDS[backend](lm, list(texts), bos=bos, long_text=long_text, progress=progress,
                                   address=ray_address, options=ray_options)


def _helper_inputs(specs, given: dict, texts: list[str]) -> dict:
    """The helper texts the methods need, each checked to hold no scored text (a reference population
    may come as `ReferenceStats` already computed)."""
    out = {}
    for role in (r for r in HELPER_NEEDS if any(r in s.needs for s in specs)):
        method = next(s.name for s in specs if role in s.needs)
        value = _require(given[role], method, f"{role}= ({ROLES[role]}; never the scored texts)")
        out[role] = value if isinstance(value, ReferenceStats) else as_helper_texts(value, role)
    check_disjoint(texts, [v.helpers if isinstance(v, ReferenceStats) else v for v in out.values()])
    return out


def _given_stats(stats: Sequence[TokenStats], texts: list[str], bos: str) -> list[TokenStats]:
    """Statistics passed in, checked to be those of these texts under this BOS policy."""
    stats = list(stats)
    if len(stats) != len(texts) or any(s.text != t for s, t in zip(stats, texts)):
        raise ValueError("stats= must hold the statistics of the given texts, in the same order")
    if any(s.bos_policy != bos for s in stats):
        raise ValueError(f"stats= were computed with another BOS policy than bos={bos!r}")
    return stats


def _require(value, method: str, what: str):
    """The value, or a TypeError saying which argument the method needs."""
    if value is None:
        raise TypeError(f"method {method!r} needs {what}")
    return value


def _frequency_table(freq, tokenizer):
    """A `FrequencyTable` from a table or a path (checked against the tokenizer when given)."""
    if isinstance(freq, FrequencyTable):
        if tokenizer is not None:
            if freq.tokenizer_fingerprint != tokenizer_fingerprint(tokenizer):
                raise ValueError("frequency table was built with a different tokenizer than the model's")
        return freq
    if isinstance(freq, (str, Path)):
        return load_frequency_table(freq, tokenizer)
    raise TypeError(f"freq must be a FrequencyTable or a path (got {type(freq).__name__})")
