"""The printed report's figures: vector SVG that parses, the first PRINT_BOOKS books in table order, names shown as
written (no mathematics, no markup, hidden characters as escapes), long names cut unless two would read alike.

matplotlib writes each text it draws as an XML comment beside its outlines; the test reads those comments back.
"""
from __future__ import annotations

import re
import xml.dom.minidom

import numpy as np
import pandas as pd

from mia_core.audit.print_figures import PRINT_BOOKS, books_svg, calibration_svg

from tests.audit.test_report_books import calibration

LONG = "A catalogue title long enough to be cut on the axis, volume "


def drawn_texts(svg: str) -> list[str]:
    return [xml.dom.minidom.parseString(f"<t>{c}</t>").documentElement.firstChild.data
            for c in re.findall(r"<!-- (.*?) -->", svg)]


def test_books_chart_draws_the_first_books_by_name_as_vectors():
    cal = calibration(np.random.default_rng(0))
    names = ["$x$ <b>&amp;", "\u202eevil.exe", LONG + "one", LONG + "two", "short"] + [f"b{i}" for i in range(45)]
    n = len(names)
    books = pd.DataFrame({"book": names, "prevalence": np.linspace(1, 0, n), "prevalence_lo": 0.0,
                          "prevalence_hi": 1.0, "rate": 0.5, "rate_lo": 0.1, "rate_hi": 0.9,
                          "p_adj": np.linspace(0.001, 1, n)})
    svg = books_svg(books, cal, ["evidence"] * 2 + ["none"] * (n - 2))
    xml.dom.minidom.parseString(svg.encode())  # well-formed, whatever the names hold
    assert "<image" not in svg  # outlines, not a bitmap
    texts = drawn_texts(svg)
    expected = ["$x$ <b>&amp;", "\\u202eevil.exe", LONG + "one", LONG + "two", "short"] + [f"b{i}" for i in range(35)]
    start = texts.index(expected[0])
    assert texts[start:start + PRINT_BOOKS] == expected  # whole names: cut to 40 characters, the two would read alike
    assert "b35" not in texts and "\u202e" not in svg
    assert texts.count("consistent with training · p(BH) 0.001") == 1 and "no evidence found · p(BH) 1" not in texts

    single = books_svg(books.iloc[[2, 4]], cal, ["none", "none"])
    assert LONG[:39] + "…" in drawn_texts(single)  # alone, the long name is cut


def test_calibration_chart_names_its_operating_point():
    cal = calibration(np.random.default_rng(0))
    texts = drawn_texts(calibration_svg(cal))
    assert f"calibration ROC (AUROC {cal.auroc:.3f})" in texts
    assert f"threshold {cal.threshold:.4g}: TPR {cal.tpr:.1%}, FPR {cal.fpr:.1%}" in texts
