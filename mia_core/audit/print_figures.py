"""The audit report's two figures for print (the PDF): vector SVG drawn with matplotlib from the same numbers as the
plotly figures of `figures.py` (calibration ROC; prevalence per book).

Plotly's own static export (kaleido) drives a headless Chrome of its own, which an offline machine cannot fetch and
a server rarely has; matplotlib draws SVG in-process, and its SVG keeps text as vector outlines, so the figures stay
sharp at any zoom and print as the reader sees them. User strings (book names) are neutralised (`names.shown_name`)
and drawn as plain text (matplotlib would otherwise read `$…$` in a name as mathematics).
"""
from __future__ import annotations

import base64
import io
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..names import shown_name
from .books import VERDICT_SHORT
from .calibration import Calibration
from .figures import LABEL_CHARS, VERDICT_COLOURS

#: Books drawn on the printed chart, in table order (a chart is one image and cannot break across pages; the table
#: and books.csv hold every book).
PRINT_BOOKS = 40
#: The books chart's width in inches: about the A4 text width at the report's margins (wider ones are scaled down).
WIDTH = 7.0


def calibration_svg(cal: Calibration) -> str:
    """The calibration ROC, chance diagonal and the operating point at the threshold with its TPR/FPR intervals."""
    fig = Figure(figsize=(5.2, 3.6))  # about square axes: a ROC's diagonal at 45 degrees
    ax = fig.add_subplot()
    ax.plot(cal.roc_fpr, cal.roc_tpr, color="#1f77b4", label=f"calibration ROC (AUROC {cal.auroc:.3f})")
    ax.plot([0, 1], [0, 1], linestyle="--", color="gray", label="chance")
    ax.errorbar([cal.fpr], [cal.tpr], xerr=[[cal.fpr - cal.fpr_ci[0]], [cal.fpr_ci[1] - cal.fpr]],
                yerr=[[cal.tpr - cal.tpr_ci[0]], [cal.tpr_ci[1] - cal.tpr]], fmt="o", color="black", capsize=3,
                label=f"threshold {cal.threshold:.4g}: TPR {cal.tpr:.1%}, FPR {cal.fpr:.1%}")
    ax.set(xlim=(-0.01, 1), ylim=(0, 1.02), xlabel="false positive rate (non-member snippets)",
           ylabel="true positive rate (member snippets)")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    return _svg(fig)


def books_svg(books: pd.DataFrame, cal: Calibration, keys: Sequence[str]) -> str:
    """Estimated prevalence per book (bars coloured by verdict, with intervals) and the raw rate (diamonds), the first
    PRINT_BOOKS books top-down in table order, the verdict and BH-adjusted p written beside each bar."""
    rows, keys = books.head(PRINT_BOOKS), list(keys)[:PRINT_BOOKS]
    y = np.arange(len(rows))
    fig = Figure(figsize=(WIDTH, 1.4 + 0.28 * len(rows)))
    ax = fig.add_subplot()
    for key in dict.fromkeys(keys):  # one legend entry per verdict, in table order
        mask = np.array([k == key for k in keys])
        part = rows[mask]
        ax.barh(y[mask], part["prevalence"], color=VERDICT_COLOURS[key], label=VERDICT_SHORT[key], height=0.6,
                xerr=[part["prevalence"] - part["prevalence_lo"], part["prevalence_hi"] - part["prevalence"]],
                error_kw={"ecolor": "#444", "capsize": 2, "elinewidth": 1})
    ax.errorbar(rows["rate"], y, xerr=[rows["rate"] - rows["rate_lo"], rows["rate_hi"] - rows["rate"]], fmt="D",
                color="black", markersize=4, elinewidth=0.8, label="raw rate (share of snippets flagged)")
    for i, (key, p) in enumerate(zip(keys, rows["p_adj"])):
        ax.text(1.06, i, f"{VERDICT_SHORT[key]} · p(BH) {p:.2g}", va="center", fontsize=7, color=VERDICT_COLOURS[key],
                parse_math=False)
    ax.axvline(cal.fpr, linestyle=":", color="gray")
    ax.text(cal.fpr, -0.9, f"calibration FPR {cal.fpr:.1%}", fontsize=7, color="gray", ha="left", parse_math=False)
    ax.set_yticks(y, _labels(rows["book"]), fontsize=7, parse_math=False)
    ax.set(xlim=(0, 1.85), ylim=(len(rows) - 0.5, -1.3), xlabel="share of the book's snippets")  # room for the verdicts
    ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0], ["0%", "20%", "40%", "60%", "80%", "100%"])
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=7, frameon=False)  # above the bars
    return _svg(fig)


def calibration_chart_html(cal: Calibration) -> str:
    """The calibration ROC as an image for the printed report."""
    return svg_img(calibration_svg(cal), "calibration ROC")


def books_chart_html(books: pd.DataFrame, cal: Calibration, keys: Sequence[str]) -> str:
    """The books chart as an image for the printed report, with a note when a catalogue has more than PRINT_BOOKS."""
    note = (f"<p class='note'>The chart shows the first {PRINT_BOOKS} of {len(books):,} books; the table shows them "
            "all.</p>" if len(books) > PRINT_BOOKS else "")
    return svg_img(books_svg(books, cal, keys), "estimated prevalence per book") + note


def svg_img(svg: str, alt: str) -> str:
    """An SVG as an `<img>` with a data URI: self-contained, and scaled to the text width by the print stylesheet."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f"<img class='figure' alt='{alt}' src='data:image/svg+xml;base64,{data}'>"


def _labels(books: pd.Series) -> list[str]:
    """Book names as axis labels: control and bidi characters shown as escapes, cut to LABEL_CHARS (whole names
    where cutting would make two books read alike, as `figures.axis_labels` does)."""
    names = [shown_name(str(b)) for b in books]
    cut = [n if len(n) <= LABEL_CHARS else n[:LABEL_CHARS - 1] + "…" for n in names]
    return cut if len(set(cut)) == len(set(names)) else names


def _svg(fig: Figure) -> str:
    """The figure as SVG text, trimmed to what is drawn."""
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight")
    return out.getvalue()
