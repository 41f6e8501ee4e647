"""`mia compare`: two runs' scores files compared text by text, against scikit-learn on the shared texts; two real
`mia eval --scores-output` files (matched by id); bad files are one line and exit 2."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from mia_core import METHODS
from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts

NUMBER = r"(-?\d\.\d{3})"
DELTA = re.compile(rf"^(.+): ΔAUROC \((.+) − (.+)\) = {NUMBER} \[{NUMBER}, {NUMBER}\], DeLong (p [=<] [^,]+), "
                   rf"on (\d+) shared texts; paired bootstrap 95% CI \[{NUMBER}, {NUMBER}\]")


def score_files(tmp_path, n: int = 24, extra: int = 6):
    """a.csv (id, text, label, loss, zlib) and b.csv (its texts shuffled, renumbered, plus `extra` of its own)."""
    rng = np.random.default_rng(4)
    texts, labels = [f"a text about topic {i}" for i in range(2 * n)], np.repeat([1, 0], n)
    loss_a = rng.normal(size=2 * n) + 0.4 * labels
    loss_b = loss_a + 0.9 * labels + 0.4 * rng.normal(size=2 * n)
    pd.DataFrame({"id": range(2 * n), "text": texts, "label": labels, "loss": loss_a,
                  "zlib": rng.normal(size=2 * n)}).to_csv(tmp_path / "a.csv", index=False)
    order = rng.permutation(2 * n)
    pd.DataFrame({"id": range(2 * n + extra), "text": [texts[i] for i in order] + [f"other {j}" for j in range(extra)],
                  "label": [*labels[order], *([1] * extra)], "loss": [*loss_b[order], *rng.normal(size=extra)]}
                 ).to_csv(tmp_path / "b.csv", index=False)
    return labels, loss_a, loss_b


def test_compare_matches_texts_by_content_and_reports_the_paired_test(tmp_path):
    labels, loss_a, loss_b = score_files(tmp_path)
    code, out, err = run_cli("compare", tmp_path / "a.csv", tmp_path / "b.csv", "--n-boot", "300", "--seed", "3")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == ["texts matched by content (SHA-256 of the text)",
                         "a.csv and b.csv share 48 texts (24 members, 24 non-members) of their 48 and 54: compared on "
                         "the shared texts only."]
    (found,) = [DELTA.match(line).groups() for line in lines[2:]]  # zlib: only in a.csv
    method, second, first, delta, lo, hi, p, n, boot_lo, boot_hi = found
    want = roc_auc_score(labels, loss_b) - roc_auc_score(labels, loss_a)
    assert (method, second, first, n) == (METHODS["loss"].label, "b.csv", "a.csv", "48")
    assert float(delta) == pytest.approx(want, abs=6e-4) and float(lo) < float(delta) < float(hi)
    assert float(boot_lo) < float(delta) < float(boot_hi) and "(300 resamples, seed 3)" in lines[2]


def test_two_eval_score_files_are_matched_by_id(model_dir, tmp_path):
    """`mia eval` twice on the same 24 texts (Min-K% with k = 0.2, then 0.6): no text in the files, so by id."""
    src = tmp_path / "in.csv"
    labels = [1, 0] * 12
    pd.DataFrame({"id": [f"t{i}" for i in range(24)], "text": random_texts(24, seed=5), "label": labels}
                 ).to_csv(src, index=False)
    for name, k in (("first", "0.2"), ("second", "0.6")):
        code, _, err = run_cli("eval", "--model", model_dir, "--input", src, "--methods", "min_k", "--k", k,
                               "--n-boot", "100", "--output", tmp_path / f"{name}.json",
                               "--scores-output", tmp_path / f"{name}.csv")
        assert code == 0, err
    code, out, err = run_cli("compare", tmp_path / "first.csv", tmp_path / "second.csv", "--n-boot", "200")
    assert code == 0, err
    first, second = (pd.read_csv(tmp_path / f"{name}.csv") for name in ("first", "second"))
    want = roc_auc_score(labels, second["min_k"]) - roc_auc_score(labels, first["min_k"])
    assert out.splitlines()[:2] == ["texts matched by id", "first.csv and second.csv scored the same 24 texts (12 "
                                    "members, 12 non-members): compared text by text."]
    assert float(DELTA.match(out.splitlines()[2]).group(4)) == pytest.approx(want, abs=6e-4)


@pytest.mark.parametrize(("content", "needle"), [
    ("id,text,label\n1,a,1\n", "not a scores file"),
    ("id,text,label,loss\n1,a,2\n2,b,0\n", "labels must be 0 (non-member) or 1 (member)"),
    ("id,text,label,loss\n" + "".join(f"{i},t{i},{i % 2},0.{i}\n" for i in range(8)), "too few for a paired test"),
])
def test_bad_or_small_files_are_one_clear_line(tmp_path, content, needle):
    (tmp_path / "x.csv").write_text(content)
    code, out, err = run_cli("compare", tmp_path / "x.csv", tmp_path / "x.csv")
    assert needle in out + err and "Traceback" not in out + err
    if needle != "too few for a paired test":  # a refusal is an answer (exit 0); a bad file is exit 2
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
