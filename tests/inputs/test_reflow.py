"""Re-flowing PDF text (`mia_core.inputs.reflow`) on hand-written cases."""
from __future__ import annotations

import pytest

from mia_core.inputs.reflow import reflow


@pytest.mark.parametrize("raw, expected", [
    ("The model was\ntrained on\nthis text.", "The model was trained on this text."),
    ("an exam-\nple of a broken word", "an example of a broken word"),
    ("a self-\nAware hyphen stays before a capital", "a self-Aware hyphen stays before a capital"),
    ("a soft\u00adhy\u00ad\nphen goes", "a soft\u00adhyphen goes"),  # a soft hyphen at the line end is removed
    ("ends with a dash -\nthen more", "ends with a dash - then more"),  # a dash after a space is no broken word
    ("First para-\ngraph line\n\nSecond one\nwraps here.", "First paragraph line\n\nSecond one wraps here."),
    ("One\n \n\t\n\n\nTwo", "One\n\nTwo"),  # several blank lines (with spaces) are one paragraph break
    ("Windows\r\nline ends\r\n\r\nkept apart", "Windows line ends\n\nkept apart"),
    ("Items:\n• first\n• second item\ncontinues\n1. numbered", "Items:\n• first\n• second item continues\n1. numbered"),
    ("  indented line  \n  and another  ", "indented line and another"),
    ("", ""),
    ("\n\n\n", ""),
])
def test_reflow_joins_lines_inside_paragraphs(raw, expected):
    assert reflow(raw) == expected


def test_reflow_is_idempotent_on_its_own_output():
    once = reflow("A long\nparagraph of PDF-\nlike text.\n\nAnd a sec-\nond.")
    assert once == "A long paragraph of PDF-like text.\n\nAnd a second."
    assert reflow(once) == once
