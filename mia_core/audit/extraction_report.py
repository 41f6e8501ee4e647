"""The extraction evidence of a book audit as a report section and a strip chart (max p_z along each book).

Kept apart from the membership sections: its heading, its first sentence and every book's finding say that it is a
fact about the model (checked by sampling), not a statistical inference about the training data.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ..names import html_text
from .extraction import ROLES, STRIP_BINS, ExtractionEvidence, finding
from .figures import axis_labels

#: log10 p_z drawn at the strip's floor (and below it: windows with a token outside the top k).
STRIP_FLOOR = -12.0


def strip_figure(evidence: ExtractionEvidence) -> go.Figure:
    """One row per book (audited, then calibration), its `STRIP_BINS` stretches coloured by the highest log10 p_z."""
    table = evidence.table
    names = table["book"].tolist()
    z = np.array([np.maximum(evidence.strips[n], STRIP_FLOOR) for n in names]) if names else np.zeros((0, STRIP_BINS))
    labels = [f"{b} ({r})" for b, r in zip(axis_labels(table["book"]), table["role"])]
    x = (np.arange(STRIP_BINS) + 0.5) * 100 / STRIP_BINS
    fig = go.Figure(go.Heatmap(
        z=z, x=x, y=labels, zmin=STRIP_FLOOR, zmax=0, colorscale="Viridis",
        colorbar={"title": {"text": "max p_z"}, "tickvals": [STRIP_FLOOR, -9, -6, -3, 0],  # 0.5 would print over 1
                  "ticktext": [f"≤ 1e{STRIP_FLOOR:.0f} or 0", "1e-9", "1e-6", "1e-3", "1"]},
        hovertemplate="%{y}<br>at %{x:.1f}% of the book<br>max log10 p_z %{z:.2f}<extra></extra>"))
    fig.update_layout(xaxis={"title": "position in the book (%)", "range": [0, 100]},
                      yaxis={"autorange": "reversed"}, height=max(220, 60 + 26 * len(names)),
                      margin={"t": 30, "b": 40})
    return fig


def extraction_section(evidence: ExtractionEvidence, figure_html: str) -> str:
    """The report's extraction section: what was tested, the table (audited books first), each book's finding."""
    s = evidence.settings
    intro = (f"<p><b>Evidence about the model, separate from membership.</b> Each window of {s.prefix} + {s.suffix} "
             f"tokens, every {s.stride} tokens along each book, was given to the model with only its {s.prefix}-token "
             f"prefix; p_z is the probability that top-{s.top_k} sampling at temperature {s.temperature:g} reproduces "
             "the suffix verbatim (Cooper et al., arXiv 2505.12546). A passage extractable with high probability is a "
             "fact about the model, which anyone can check by sampling; it is not a statistical inference that the "
             "book was in the training data (a text copied widely on the web, or formulaic, can be extractable too). "
             "Intervals count non-overlapping suffix blocks, not overlapping windows. Calibration books show what "
             "books of known membership reach.</p>")
    table = evidence.table.assign(_order=evidence.table["role"].map({r: i for i, r in enumerate(ROLES)}))
    rows = []
    for row in table.sort_values("_order", kind="stable").to_dict("records"):
        rows.append("<tr>" + "".join([
            f"<td>{html_text(row['book'])}</td>", f"<td>{html_text(row['role'])}</td>", f"<td>{row['extraction_windows']:,}</td>",
            f"<td>{_share(row, 'pz_ge_0.5')}</td>", f"<td>{_share(row, 'pz_ge_0.01')}</td>",
            f"<td>{_share(row, 'greedy')}</td>", f"<td>{row['passages']:,} ({row['passage_chars']:,} chars)</td>",
            f"<td>{html_text(row['longest_passage']) or '–'}</td>"]) + "</tr>"
            + f"<tr class='finding'><td colspan='8'>{html_text(finding(row))}</td></tr>")
    head = ("<table class='extraction'><thead><tr><th>book</th><th>role</th><th>windows</th><th>p_z ≥ 0.5 "
            "[interval]</th><th>p_z ≥ 0.01 [interval]</th><th>greedy [interval]</th><th>passages at p_z ≥ 0.5</th>"
            "<th>longest passage</th></tr></thead>")
    return ("<h2>Verbatim extraction</h2>" + intro + figure_html + head + "".join(rows) + "</table>")


def _share(row: dict, key: str) -> str:
    value, (low, high) = row[f"share_{key}"], row[f"share_{key}_ci"]
    if math.isnan(value):
        return "–"
    return f"{value:.1%} [{low:.1%}–{high:.1%}]"

