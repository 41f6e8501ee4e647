"""One supplier per need: what a method `needs` (NEEDS in `mia_core.api`) is made here, once per scoring call.

A supplier reads the call (`Request`: the model, the texts and their statistics, the policies, what the caller gave)
and returns the need's value: one per text (`PerText`: a lowercased pass, a reference model's statistics) or one
shared by every text (a frequency table, helper texts, a fitted classifier, the model itself). Scoring runs one loop
over the suppliers of the needs its methods declare; nothing here names a method.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..api import HELPER_NEEDS, MethodSpec, TokenStats
from ..methods.dc_pdd.frequency import FrequencyTable, load_frequency_table
from ..methods.helper_texts import ROLES, HelperTexts, ReferenceStats, as_helper_texts, check_disjoint
from ..model.identity import tokenizer_fingerprint
from ..model.language_model import LanguageModel
from ..model.same_tokens import same_token_stats
from .backends import text_stats

#: Keyword arguments of `score` / `score_texts` that supply a need rather than set a parameter.
INPUT_KWARGS = ("lm", "lowercase_stats", "ref_model", "ref_stats", "ref_same_token_stats", "freq", "classifier", *HELPER_NEEDS)
#: Needs whose supplier reads only what the caller gave (no model pass, no statistics): they can be made before the
#: target's pass, so methods that need nothing else are scored while its statistics stream in.
GIVEN_NEEDS = ("freq", "classifier")


@dataclass
class Request:
    """One scoring call as the suppliers see it."""

    lm: LanguageModel | None
    texts: list[str]
    stats: list[TokenStats]
    bos: str
    long_text: str
    specs: list[MethodSpec]
    given: dict[str, Any] = field(default_factory=dict)
    """What the caller gave, by input name (`INPUT_KWARGS`)."""
    where: dict[str, Any] = field(default_factory=dict)
    """Where the target's passes run: backend, ray_address, ray_options."""
    progress: Callable[[int, int], None] | None = None
    first_text: int = 0
    """The number of the first text in errors (its place in all the texts scored in parts)."""

    def wanting(self, need: str) -> str:
        """The first method that needs `need` (for messages)."""
        return next(s.name for s in self.specs if need in s.needs)

    def require(self, name: str, what: str, need: str):
        """The given input `name`, or a TypeError saying which method needs what."""
        value = self.given.get(name)
        if value is None:
            raise TypeError(f"method {self.wanting(need)!r} needs {what}")
        return value

    def model(self, need: str) -> LanguageModel:
        """The target model, which the need's supplier runs."""
        if self.lm is None:
            raise TypeError(f"method {self.wanting(need)!r} needs lm= (the target model)")
        return self.lm


@dataclass(frozen=True)
class PerText:
    """A need's value for each text, in the order of the texts."""

    values: list


def _per_text(given, req: Request, name: str) -> PerText:
    """Statistics given by the caller: one `TokenStats` (one text) or one per text, checked against the texts."""
    values = [given] if isinstance(given, TokenStats) else list(given)
    if len(values) != len(req.texts):
        raise ValueError(f"{name}= must hold one entry per text ({len(req.texts)}, got {len(values)})")
    return PerText(values)


def lowercase_stats(req: Request) -> PerText:
    """The target's statistics of each text lowercased (given, computed with the target's, or computed now)."""
    if req.given.get("lowercase_stats") is not None:
        return _per_text(req.given["lowercase_stats"], req, "lowercase_stats")
    lowered = [t.lower() for t in req.texts]
    return PerText(text_stats(req.model("lowercase_stats"), lowered, bos=req.bos, long_text=req.long_text,
                              progress=req.progress, **req.where))


def ref_stats(req: Request) -> PerText:
    """Each text's statistics under the reference model (given as `ref_stats=`, or computed by `ref_model=`)."""
    if req.given.get("ref_stats") is not None:
        return _per_text(req.given["ref_stats"], req, "ref_stats")
    ref_model = req.require("ref_model", "ref_stats= or ref_model= (a reference model)", "ref_stats")
    return PerText(ref_model.token_stats(req.texts, bos=req.bos, progress=req.progress, long_text=req.long_text))


def ref_same_token_stats(req: Request) -> PerText:
    """Each text's statistics under the reference model on the target's ids (given as `ref_same_token_stats=`, or
    computed by `ref_model=` with the target's tokenizer), checked to pair with the target's token by token."""
    need = "ref_same_token_stats"
    method = req.wanting(need)
    if req.given.get(need) is not None:
        paired = _per_text(req.given[need], req, need)
    else:
        ref_model = req.require("ref_model", "ref_model= (a reference model sharing the target's tokenizer)", need)
        paired = PerText(same_token_stats(ref_model, req.model(need), req.texts, method=method, bos=req.bos,
                                          long_text=req.long_text, progress=req.progress))
    for i, (target, reference) in enumerate(zip(req.stats, paired.values)):
        if not np.array_equal(target.token_ids, reference.token_ids):
            raise ValueError(f"{method} compares token by token: the reference pass of text {i + req.first_text} scored other tokens "
                             f"than the target's ({reference.n_scored} tokens against {target.n_scored})")
    return paired


def frequency(req: Request) -> FrequencyTable:
    """The frequency table (a table or its path), checked against the target's tokenizer."""
    return frequency_table(req.require("freq", "freq= (a frequency table or its path)", "freq"),
                           req.lm.tokenizer if req.lm is not None else None)


def target_model(req: Request) -> LanguageModel:
    """The target model itself, for a method's own further passes."""
    return req.model("lm")


def fitted(need: str) -> Callable[[Request], Any]:
    """A fitted value (e.g. a classifier), given as such or as the folder it was saved in (loaded by the method)."""
    def supply(req: Request) -> Any:
        value = req.require(need, f"{need}= (fitted on labelled data)", need)
        spec = next(s for s in req.specs if s.supervised is not None and s.supervised.fits == need)
        return spec.supervised.resolve(value)
    return supply


def helper_texts(role: str) -> Callable[[Request], Any]:
    """Known texts of one role (prefix shots); a reference population also gets the target's statistics."""
    def supply(req: Request) -> Any:
        value = req.given[role]  # checked and converted by `helper_inputs` before any model pass
        if role == "reference" and not isinstance(value, ReferenceStats):
            return reference_stats(req.model(role), value, bos=req.bos, long_text=req.long_text, **req.where)
        return value
    return supply


#: The supplier of each need (the target's statistics are the scorer's first argument, not supplied here).
SUPPLIERS: dict[str, Callable[[Request], Any]] = {
    "lowercase_stats": lowercase_stats,
    "ref_stats": ref_stats,
    "ref_same_token_stats": ref_same_token_stats,
    "freq": frequency,
    "lm": target_model,
    "classifier": fitted("classifier"),
    **{role: helper_texts(role) for role in HELPER_NEEDS},
}


def supply(req: Request, made: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every need of the request's methods, each made once by its supplier, in the order of `NEEDS` (those in `made`
    were made already and are not made again)."""
    wanted = {n for s in req.specs for n in s.needs} - {"stats"}
    made = made or {}
    return {need: made[need] if need in made else supplier(req) for need, supplier in SUPPLIERS.items() if need in wanted}


def helper_inputs(specs: Sequence[MethodSpec], given: dict, texts: list[str]) -> dict:
    """The helper texts the methods need, each checked to hold no scored text (a reference population may come as
    `ReferenceStats` already computed); checked before any model pass."""
    out = {}
    for role in (r for r in HELPER_NEEDS if any(r in s.needs for s in specs)):
        if given.get(role) is None:
            method = next(s.name for s in specs if role in s.needs)
            raise TypeError(f"method {method!r} needs {role}= ({ROLES[role]}; never the scored texts)")
        value = given[role]
        out[role] = value if isinstance(value, ReferenceStats) else as_helper_texts(value, role)
    check_disjoint(texts, [v.helpers if isinstance(v, ReferenceStats) else v for v in out.values()])
    return out


def reference_stats(lm: LanguageModel, texts, *, bos: str = "auto", long_text: str = "sliding", backend: str = "local",
                    ray_address: str | None = None, ray_options: Any = None) -> ReferenceStats:
    """Known non-member texts (or `HelperTexts`) with the target's statistics of each, for CAMIA's calibration."""
    helpers = as_helper_texts(texts, "reference")
    return ReferenceStats(helpers, tuple(text_stats(lm, helpers.texts, bos=bos, long_text=long_text, backend=backend,
                                                    ray_address=ray_address, ray_options=ray_options)))


def frequency_table(freq, tokenizer) -> FrequencyTable:
    """A `FrequencyTable` from a table or a path (checked against the tokenizer when given)."""
    if isinstance(freq, FrequencyTable):
        if tokenizer is not None and freq.tokenizer_fingerprint != tokenizer_fingerprint(tokenizer):
            raise ValueError("frequency table was built with a different tokenizer than the model's")
        return freq
    if isinstance(freq, (str, Path)):
        return load_frequency_table(freq, tokenizer)
    raise TypeError(f"freq must be a FrequencyTable or a path (got {type(freq).__name__})")


__all__ = ["GIVEN_NEEDS", "INPUT_KWARGS", "PerText", "Request", "SUPPLIERS", "HelperTexts", "helper_inputs", "reference_stats",
           "frequency_table", "supply"]
