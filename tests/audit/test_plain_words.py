"""Each book in plain words: the numbers of its row in sentences, and the limit of its own verdict beside them."""
from __future__ import annotations

import pandas as pd

from mia_core.audit.books import VERDICTS, analyse_books, verdict_keys
from mia_core.audit.plain_words import CANNOT, book_paragraph

from tests.audit.test_statistics import two_by_two


def test_each_verdict_reads_its_numbers_and_its_limit():
    assert set(CANNOT) == set(VERDICTS)  # every verdict says what it cannot show
    cal = two_by_two(5)
    snippets = pd.DataFrame({"book": ["read"] * 6 + ["unread"] * 6, "position": list(range(6)) * 2,
                             "score": [6.0, 7, 8, 6.5, 0.3, 9] + [0.1, 0.2, 0.3, 0.4, 0.15, 0.25]})
    table = analyse_books(cal, snippets)
    keys = dict(zip(table["book"], verdict_keys(table, cal)))
    assert keys == {"read": "evidence", "unread": "none"}
    rows = {row.book: row for row in table.itertuples()}
    read = book_paragraph(rows["read"], "evidence", cal, snippet_words=64, method="Min-K%++", model="demo-known")
    assert read.startswith("What was measured: 6 snippets of 64 words, each scored with Min-K%++ under demo-known; "
                           "5 of them (83%, interval ")
    assert f"flags {cal.fpr:.1%} of the known non-member snippets and {cal.tpr:.1%}" in read
    assert f"(adjusted p {rows['read'].p_adj:.2g})" in read and "evidence consistent with training" in read
    assert read.endswith(CANNOT["evidence"])
    unread = book_paragraph(rows["unread"], "none", cal, snippet_words=64, method="Min-K%++", model="demo-known")
    assert "0 of them (0%" in unread and "no evidence of training was found" in unread
    assert unread.endswith(CANNOT["none"].format(tpr=f"{cal.tpr:.0%}"))
    gated = book_paragraph(rows["read"], "too_few", cal, snippet_words=64, method="Min-K%++", model="demo-known")
    assert "No verdict is given: too few snippets." in gated and gated.endswith(CANNOT["too_few"])
