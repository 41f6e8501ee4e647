"""Methods scored batch by batch as the target's statistics arrive, with each method's batch form where it has one.

`token_stats` hands on the texts a finished batch completed (`on_batch`) while the device computes the next batch;
`Stream.score_batch` scores them there, so the host's work per text overlaps the device's. A method with a batch form
(`MethodSpec.batch`) scores a whole group in one vectorised pass; the others, and texts with nothing to score (whose
per-text form raises the error the user reads), go text by text. Values and errors are the same either way.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..api import MethodSpec, StatsBatch, TokenStats
from ..model.forward import pack_lengths

#: Padded entries per array of one `StatsBatch` (2^20: 8 MB of float64); texts are grouped longest-first under it.
BATCH_ELEMENTS = 1 << 20
#: Padding allowed in a group: a text shorter than this share of the group's longest starts a new group.
BATCH_MIN_FILL = 0.5
#: Texts longer than this many scored tokens go to the per-text form, which bounds its own temporaries (10^7 tokens).
BATCH_MAX_TOKENS = 1 << 16


def batch_groups(stats: Sequence[TokenStats]) -> list[list[int]]:
    """Indices of the texts batch forms take (at least one and at most `BATCH_MAX_TOKENS` scored tokens), grouped
    longest-first under `BATCH_ELEMENTS` padded entries."""
    live = [j for j, st in enumerate(stats) if 0 < st.n_scored <= BATCH_MAX_TOKENS]
    groups = pack_lengths([stats[j].n_scored for j in live], BATCH_ELEMENTS, min_fill=BATCH_MIN_FILL)
    return [[live[g] for g in group] for group in groups]


def method_values(spec: MethodSpec, params: Any, inputs: dict[str, Any], stats: Sequence[TokenStats],
                  groups: list[tuple[list[int], StatsBatch]]) -> tuple[list[float | None], dict[int, Exception]]:
    """One method's value of every text (None where it raised) and the errors by text: its batch form over each group
    of texts with tokens, then the per-text form for every text left (all of a group its batch form refused)."""
    values: list[float | None] = [None] * len(stats)
    if spec.batch is not None:
        for indices, batch in groups:
            try:
                found = spec.batch(batch, params, **inputs)
            except Exception:  # noqa: BLE001  (a table of another width, say: the per-text form names each text's
                continue  # problem, raised in order by `Stream.values` as for a method without a batch form)
            for j, value in zip(indices, found.tolist()):
                values[j] = value
    errors: dict[int, Exception] = {}
    for j, st in enumerate(stats):
        if values[j] is None:
            try:
                values[j] = spec.fn(st, params, **inputs).value
            except Exception as err:  # noqa: BLE001  (raised in order by `Stream.values`, as scoring afterwards would)
                errors[j] = err
    return values, errors


class Stream:
    """Methods scored group by group as statistics arrive (`score_batch`), holding each value or error until asked."""

    def __init__(self, specs: list[MethodSpec], params: dict[str, Any], supplied: dict[str, Any], n_texts: int,
                 first_text: int = 0):
        # per method: its spec, parameters and inputs (looked up once, not once per text)
        self.work = [(spec, params[spec.name], {n: supplied[n] for n in spec.needs if n != "stats"}) for spec in specs]
        self.scores: dict[str, list[float | None]] = {spec.name: [None] * n_texts for spec in specs}
        self.errors: dict[str, dict[int, Exception]] = {spec.name: {} for spec in specs}
        self.done = [False] * n_texts
        self.first_text = first_text  # the number of text 0 in errors (its place in all the texts scored)

    def score_batch(self, indices: Sequence[int], stats: Sequence[TokenStats]) -> None:
        """Score texts `indices` (their statistics `stats`) with every streamed method."""
        groups = [(group, StatsBatch(tuple(stats[j] for j in group))) for group in batch_groups(stats)] \
            if any(spec.batch is not None for spec, _, _ in self.work) else []
        for spec, params, inputs in self.work:
            values, errors = method_values(spec, params, inputs, stats, groups)
            for j, i in enumerate(indices):
                self.scores[spec.name][i] = values[j]
                if j in errors:
                    self.errors[spec.name][i] = errors[j]
        for i in indices:
            self.done[i] = True

    def values(self, spec: MethodSpec, stats: list[TokenStats]) -> list[float]:
        """One method's scores in text order (texts that did not stream, e.g. given statistics, are scored now)."""
        left = [i for i, done in enumerate(self.done) if not done]
        if left:
            self.score_batch(left, [stats[i] for i in left])
        errors = self.errors[spec.name]
        if errors:
            first = min(errors)
            if isinstance(errors[first], ValueError):  # as `_score_all` names it
                raise ValueError(f"text {first + self.first_text}: {errors[first]}") from None
            raise errors[first]
        return self.scores[spec.name]  # type: ignore[return-value]
