"""One colour meaning on every page, chart, heatmap and report: red = member-like, blue = non-member-like.

"Member-like" is the direction of higher scores (every method is oriented so), of label 1 and of the
verdicts that say a book is consistent with training; "non-member-like" is lower scores, label 0 and
clean verdicts. Grey is "no label" or "not decided". Colours are ColorBrewer RdBu ends (colour-blind safe
against each other) so red and blue never swap meaning between a heatmap and the chart above it.
"""
from __future__ import annotations

#: Member-like: higher scores, label 1, "consistent with training".
MEMBER = "#b2182b"
#: Non-member-like: lower scores, label 0, "consistent with a clean book".
NONMEMBER = "#2166ac"
#: No label, or no decision (too few snippets, not significant).
NEUTRAL = "#888888"
#: The heatmap's diverging scale as RGB: its low end, its centre (the method's natural zero) and its high end.
LOW_RGB, MID_RGB, HIGH_RGB = (33, 102, 172), (247, 247, 247), (178, 24, 43)
#: Label → colour and name, for charts that colour texts or windows by known membership.
LABEL_COLOURS = {1: MEMBER, 0: NONMEMBER, -1: NEUTRAL}
LABEL_NAMES = {1: "member", 0: "non-member", -1: "no label"}


def rgba(hex_colour: str, alpha: float) -> str:
    """"#rrggbb" with transparency, for overlaid histograms and bands."""
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha:g})"
#: Extraction probability (p_z, `extract.render`): its own sequential scale, ColorBrewer YlGn (9 classes), one colour
#: per decade from 10⁻⁸ (pale yellow) to 1 (dark green). Never red or blue: p_z is a fact about the model, not a
#: membership score, and must not read as one.
EXTRACTION_RGB = ((255, 255, 229), (247, 252, 185), (217, 240, 163), (173, 221, 142), (120, 198, 121), (65, 171, 93),
                  (35, 132, 67), (0, 104, 55), (0, 69, 41))
