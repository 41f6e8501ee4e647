"""Scoring front doors: `score` for one `TokenStats`, `score_texts` for a list of texts and methods.

They supply what each method `needs` (a lowercased pass, a reference model's statistics, a
frequency table), batching every extra model pass over all texts at once.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from .frequency import FrequencyTable, load_frequency_table
from .identity import tokenizer_fingerprint
from .methods import Score, get_method
from .methods.registry import check_k
from .ray_backend import RayOptions, check_backend
from .token_stats import TokenStats

#: Keyword arguments that supply a method's inputs rather than its parameters.
INPUT_KWARGS = ("lm", "lowercase_stats", "ref_model", "ref_stats", "freq", "classifier")


def score(name: str, stats: TokenStats, **kwargs: Any) -> Score:
    """Score one text's statistics with a registered method.

    Inputs by need: `lowercase` takes `lowercase_stats=` or `lm=` (the target model, to compute
    them); `ref` takes `ref_stats=` or `ref_model=`; `dc_pdd` takes `freq=` (a `FrequencyTable` or
    its path). Remaining keyword arguments are the method's parameters (e.g. `k=0.2`).
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
    return inputs


def score_texts(
    lm,
    texts: Sequence[str],
    methods: Sequence[str],
    k: float = 0.2,
    bos: str = "auto",
    *,
    progress: Callable[[int, int], None] | None = None,
    long_text: str = "sliding",
    stats: Sequence[TokenStats] | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    ray_options: RayOptions | None = None,
    **params: Any,
) -> pd.DataFrame:
    """Score every text with every method: one row per text, one column per method (higher = member).

    `params` holds method parameters (e.g. `a=0.01` for dc_pdd) and inputs (`ref_model=`, `freq=`);
    `k` goes to every method that has a `k`. Extra model passes run batched over all texts.
    `stats` : the texts' statistics when already computed (e.g. by `text_stats`), else computed here.
    `backend` : "local", or "ray" to compute the target model's statistics (and the lowercased pass)
    on Ray model actors (`ray_address` picks the cluster); the methods run here either way, so every
    method works unchanged (a reference model's pass and methods' own extra passes stay local).
    """
    methods = list(dict.fromkeys(methods))  # each method once, in the given order
    specs = [get_method(m) for m in methods]
    if any("k" in s.param_names for s in specs):
        check_k(k)
    needs = {n for s in specs for n in s.needs}
    ref_model, freq = params.pop("ref_model", None), params.pop("freq", None)
    classifier = params.pop("classifier", None)
    used = {name for s in specs for name in s.param_names}
    unused = set(params) - used
    if unused:
        raise TypeError(f"parameters {sorted(unused)} are not used by methods {list(methods)}")
    texts = [str(t) for t in texts]
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
    if "classifier" in needs:  # gradient features of all texts in batched backwards; the method reads them back
        from .gds import as_classifier

        name = next(s.name for s in specs if "classifier" in s.needs)
        classifier = as_classifier(_require(classifier, name, "classifier= (fitted on labelled data)"))
        classifier.score_texts(lm, [st.text for st in stats if st.n_scored > 0])  # empty ones: the method says why
    columns = {}
    for spec in specs:
        method_params = spec.make_params(**{n: v for n, v in {**params, "k": k}.items() if n in spec.param_names})
        values = []
        for i, st in enumerate(stats):
            inputs = {n: extra[n][i] for n in spec.needs if n in extra}
            if table is not None and "freq" in spec.needs:
                inputs["freq"] = table
            if "lm" in spec.needs:
                inputs["lm"] = lm
            if "classifier" in spec.needs:
                inputs["classifier"] = _require(classifier, spec.name, "classifier= (fitted on labelled data)")
            try:
                values.append(spec.fn(st, method_params, **inputs).value)
            except ValueError as err:
                raise ValueError(f"text {i}: {err}") from None
        columns[spec.name] = values
    return pd.DataFrame(columns)


def text_stats(
    lm,
    texts: Sequence[str],
    *,
    bos: str = "auto",
    long_text: str = "sliding",
    progress: Callable[[int, int], None] | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    ray_options: RayOptions | None = None,
) -> list[TokenStats]:
    """`lm.token_stats(texts)` computed in this process ("local") or by model actors on a Ray cluster ("ray")."""
    check_backend(backend)
    if backend == "ray":
        from .ray_backend import resolve_options, token_stats

        return token_stats(lm, list(texts), bos=bos, long_text=long_text, progress=progress,
                           options=resolve_options(ray_address, ray_options))
    return lm.token_stats(texts, bos=bos, progress=progress, long_text=long_text)


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
