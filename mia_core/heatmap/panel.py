"""A method's heatmap as it is shown: its score, the colour scale chosen for it (with a note on where the scale comes
from) and its legend's words, all read from the method's registration (`MethodSpec.view`).

Three scales: "fixed" (the range the method declares, so the same token score gets the same colour in every text; a
method that declares none falls back to the text's own range, and the note says so), "reference" (the 5th–95th
percentile of a reference set's token scores, e.g. known non-members under this model) and "text" (this text's own
5th–95th percentile: its contrasts show best, its colours compare with no other text). Explore, `mia heatmap`, the
window view and the audit report choose their scale here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..api import MethodSpec, Score, TokenStats
from ..methods import get_method
from .render import Scale, colour_scale, fixed_scale, heatmap_html, legend_html, reference_scale

#: The colour scales a panel can be drawn on.
SCALES = ("fixed", "reference", "text")


@dataclass(frozen=True)
class Panel:
    """One method's heatmap as shown: its score, colour scale and the words of its legend."""

    method: str
    label: str
    score: Score
    scale: Scale
    scale_note: str
    member_high: bool = True
    colour_means: str = ""
    low_means: str = ""
    high_means: str = ""
    outlined: str = "tokens in the sequence score"


def make_panel(method: str, score: Score, *, scale: str = "fixed",
               reference_token_scores: Sequence[np.ndarray] | None = None,
               reference_source: str = "the known non-members") -> Panel:
    """The method's panel on the chosen scale, its legend's words from the method's token view.

    reference_token_scores : the token scores of the reference texts under this method (one array per text), for
        `scale="reference"`; with none, the reference scale falls back to the fixed one and its note says so.
    reference_source : what the reference texts are, for the legend ("the demo's known non-members").
    """
    spec = get_method(method)
    chosen, note = choose_scale(spec, score.token_scores, scale, reference_token_scores, reference_source)
    view = spec.view
    return Panel(method, spec.label, score, chosen, note, view.member_high, view.colour, view.low, view.high,
                 view.outlined)


def choose_scale(spec: MethodSpec, token_scores: np.ndarray, how: str,
                 reference_token_scores: Sequence[np.ndarray] | None = None,
                 reference_source: str = "the known non-members") -> tuple[Scale, str]:
    """The (low, centre, high) to colour the method's token scores with, and the legend's note on where it comes
    from."""
    if how not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)} (got {how!r})")
    centre = spec.centre
    if how == "reference" and reference_token_scores:
        return reference_scale(list(reference_token_scores), centre=centre), (
            f"fixed: 5th–95th percentile of the token scores of {len(reference_token_scores)} of {reference_source}")
    if how != "text" and spec.token_range is not None:
        low, high = spec.token_range
        unmet = " (no known non-members with their texts chosen below)" if how == "reference" else ""
        return fixed_scale(spec.token_range, centre=centre), f"fixed for {spec.label}: {low:g} to {high:g}{unmet}"
    note = "this text: its 5th–95th percentile" if how == "text" else (
        f"this text's 5th–95th percentile ({spec.label} declares no fixed range)")
    return colour_scale(np.asarray(token_scores, dtype=np.float64), centre=centre), note


def panel_html(stats: TokenStats, panel: Panel, decode: Callable[[int], str] | None, page: tuple[int, int] | None,
               *, element_id: str | None = None) -> str:
    """The heatmap of the panel's token scores (one page of them) with the legend for this method and scale."""
    body = heatmap_html(stats, np.asarray(panel.score.token_scores, dtype=float), panel.score.selected,
                        scale=panel.scale, member_high=panel.member_high, decode=decode,
                        element_id=element_id or f"heatmap-{panel.method}", legend=False, page=page)
    return body + panel_legend(panel)


def panel_legend(panel: Panel) -> str:
    """The legend of a panel: its colour bar, what each end and the outline mean for its method, its scale."""
    return legend_html(*panel.scale, member_high=panel.member_high, colour_means=panel.colour_means,
                       low_means=panel.low_means, high_means=panel.high_means, outlined=panel.outlined,
                       scale_note=panel.scale_note)
