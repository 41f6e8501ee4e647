"""Two runs matched text by text: the shared texts whatever the row order, repeats and conflicting labels, the
refusal below the minimum, the paired result on the shared texts only, and the sentences a researcher cites."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mia_core.paired import delong
from mia_core.run_pairing import MIN_PER_CLASS, compare_runs, delta_sentence, p_words, shared_sentence, shared_texts


def run(texts: list[str], labels: list[int], **scores: list[float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's held-out texts (text, label; ids numbered from 0 as an upload's rows are) and its scores."""
    return (pd.DataFrame({"id": range(len(texts)), "text": texts, "label": labels}),
            pd.DataFrame(scores, index=range(len(texts))))


def test_texts_are_matched_by_content_not_by_row_id():
    """Run b holds a's texts reversed, plus one of its own, one repeat, and one text labelled the other way."""
    data_a, _ = run(["t0", "t1", "t2", "t3"], [1, 0, 1, 0], loss=[0, 0, 0, 0])
    data_b, _ = run(["new", "t3", "t2", "t2", "t1", "t0"], [1, 0, 1, 1, 1, 1], loss=[0] * 6)
    s = shared_texts(data_a, data_b)
    matched = sorted(zip(data_a["text"][s.rows_a], data_b["text"][s.rows_b]))
    assert matched == [("t0", "t0"), ("t2", "t2"), ("t3", "t3")]  # t1: member in b, non-member in a
    assert s.conflicting == 1 and (s.n_a, s.n_b) == (4, 6) and (s.n_members, s.n_nonmembers) == (2, 1)
    assert list(s.rows_b[s.rows_a == 2]) == [2]  # the repeated t2: its first row


def two_runs(n: int = 30, extra_b: int = 0, seed: int = 0):
    """Runs a and b on `n` texts per class (b also on `extra_b` texts of its own, and in another row order)."""
    rng = np.random.default_rng(seed)
    texts = [f"text {i}" for i in range(2 * n)]
    labels = [1] * n + [0] * n
    loss_a = rng.normal(size=2 * n) + 0.3 * np.array(labels)
    loss_b = loss_a + 0.8 * np.array(labels) + 0.5 * rng.normal(size=2 * n)
    data_a, scores_a = run(texts, labels, loss=list(loss_a), zlib=list(rng.normal(size=2 * n)))
    order = rng.permutation(2 * n)
    data_b, scores_b = run([texts[i] for i in order] + [f"other {j}" for j in range(extra_b)],
                           [labels[i] for i in order] + [j % 2 for j in range(extra_b)],
                           loss=list(loss_b[order]) + list(rng.normal(size=extra_b)))
    return (data_a, scores_a, data_b, scores_b), (np.array(labels), loss_a, loss_b)


def test_the_same_texts_in_another_order_are_compared_text_by_text():
    (data_a, scores_a, data_b, scores_b), (labels, loss_a, loss_b) = two_runs()
    pair = compare_runs("#1", data_a, scores_a, "#2", data_b, scores_b, n_boot=200, seed=0)
    assert pair.refused is None and [m.method for m in pair.methods] == ["loss"]  # zlib: only in run a
    want = delong(labels, loss_a, loss_b)  # aligned by hand, row for row
    got = pair.methods[0].test
    assert got.delta == pytest.approx(want.delta, abs=1e-12) and got.p == pytest.approx(want.p, abs=1e-12)
    assert shared_sentence(pair) == ("#1 and #2 scored the same 60 texts (30 members, 30 non-members): compared "
                                     "text by text.")
    lo, hi = want.ci
    boot = pair.methods[0].bootstrap
    assert want.p < 0.0001  # written as a bound
    assert delta_sentence(pair, pair.methods[0], "Loss") == (
        f"Loss: ΔAUROC (#2 − #1) = {want.delta:.3f} [{lo:.3f}, {hi:.3f}], DeLong p < 0.0001, on 60 "
        f"shared texts; paired bootstrap 95% CI [{boot.ci[0]:.3f}, {boot.ci[1]:.3f}] (200 resamples, seed 0).")


def test_partly_shared_texts_are_compared_on_those_only():
    (data_a, scores_a, data_b, scores_b), (labels, loss_a, loss_b) = two_runs(extra_b=20)
    pair = compare_runs("#1", data_a, scores_a, "#3", data_b, scores_b, n_boot=100)
    assert pair.methods[0].test.delta == pytest.approx(delong(labels, loss_a, loss_b).delta, abs=1e-12)
    assert shared_sentence(pair) == ("#1 and #3 share 60 texts (30 members, 30 non-members) of their 60 and 80: "
                                     "compared on the shared texts only.")


def test_too_few_shared_texts_are_refused_with_a_reason():
    (data_a, scores_a, data_b, scores_b), _ = two_runs(n=MIN_PER_CLASS - 1)
    pair = compare_runs("#1", data_a, scores_a, "#2", data_b, scores_b)
    assert pair.refused and pair.methods == []
    assert shared_sentence(pair) == (f"#1 and #2 share 18 texts (9 members, 9 non-members): too few for a paired test "
                                     f"(a paired test needs ≥ {MIN_PER_CLASS} shared members and ≥ {MIN_PER_CLASS} "
                                     "shared non-members).")
    other, _ = run(["elsewhere"], [1], loss=[0.0])
    none = compare_runs("#1", data_a, scores_a, "#4", other, other)
    assert shared_sentence(none) == "#1 and #4 scored no text in common: no paired test."


@pytest.mark.parametrize(("p", "text"), [(0.00043, "p = 0.00043"), (0.3149, "p = 0.31"), (1.0, "p = 1"),
                                         (3e-7, "p < 0.0001"), (float("nan"), "p undefined (zero standard error)")])
def test_p_values_are_written_to_two_significant_digits(p, text):
    assert p_words(p) == text
