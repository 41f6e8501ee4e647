"""Per-token heatmaps: HTML rendering and colour scales (`render`), a method's panel with its chosen scale and
legend words (`panel`), and the standalone page of Explore's download and `mia heatmap` (`document`)."""
from .document import heatmap_document
from .panel import SCALES, Panel, choose_scale, make_panel, panel_html, panel_legend
from .render import (
    HIGH, LOW, MID, TIP_CSS, Scale, colour, colour_scale, fixed_scale, heatmap_html, legend_html, page_bounds,
    reference_scale, text_colour, token_spans, token_tooltip,
)

__all__ = ["HIGH", "LOW", "MID", "SCALES", "TIP_CSS", "Panel", "Scale", "choose_scale", "colour", "colour_scale",
           "fixed_scale", "heatmap_document", "heatmap_html", "legend_html", "make_panel", "page_bounds", "panel_html",
           "panel_legend", "reference_scale", "text_colour", "token_spans", "token_tooltip"]
