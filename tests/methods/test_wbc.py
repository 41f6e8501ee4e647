"""WBC against a naive float64 re-computation of METHODS-FIELD.md §13, by hand, on its edge cases, through the
same-token reference pass, and from the command line with `--ref-model` and `--param windows=…`."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mia_core import get_method, load_model, score, score_texts
from mia_core.methods.wbc import DEFAULT_WINDOWS

from tests.methods.test_ez_mia import REFUSAL, stats_of
from tests.support.cli_runner import run_cli
from tests.support.oracle import naive_stats
from tests.support.tiny import random_texts, save_tiny_model, tiny_gpt2, tiny_llama, tiny_tokenizer

TEXTS = random_texts(4, seed=33, min_words=3, max_words=30)


def naive_wbc(target, reference, sizes) -> float:
    """The spec's votes one window at a time in Python floats: w' = min(w, n), a window votes member when its summed
    d is > 0 (a tie votes non-member), the share per size, the mean over sizes."""
    d = [float(a) - float(b) for a, b in zip(target, reference)]
    shares = []
    for w in sizes:
        width = min(w, len(d))
        sums = [sum(d[i:i + width]) for i in range(len(d) - width + 1)]
        shares.append(sum(1 for s in sums if s > 0) / len(sums))
    return sum(shares) / len(shares)


def wbc(target_lp, ref_lp, **params):
    ids = list(range(len(target_lp)))
    return score("wbc", stats_of(target_lp, ids, ids), ref_same_token_stats=stats_of(ref_lp, ids, ids), **params)


def test_a_hand_computed_case():
    # d = [0.5, −1, 0.25, 0.75, −0.5]; w = 1: 3 of 5 windows > 0; w = 2: sums −0.5, −0.75, 1, 0.25 → 2 of 4;
    # w = 6 > n: one window over the whole text, sum exactly 0 → a tie, votes non-member
    got = wbc([-1.5, -3.0, -1.75, -1.25, -2.5], [-2.0] * 5, windows="1,2,6")
    assert got.value == pytest.approx((3 / 5 + 2 / 4 + 0) / 3, rel=1e-15)
    assert got.details["votes"] == {1: 0.6, 2: 0.5, 6: 0.0} and got.details["short_text"]
    np.testing.assert_array_equal(got.token_scores, [0.5, -1.0, 0.25, 0.75, -0.5])
    assert got.selected.all()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("windows", [DEFAULT_WINDOWS, "1", "3,5,7"])
def test_matches_the_naive_votes_on_random_inputs(seed, windows):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    target, reference = (-rng.exponential(2, n)).astype(np.float32), (-rng.exponential(2, n)).astype(np.float32)
    sizes = [int(w) for w in windows.split(",")]
    got = wbc(target, reference, windows=windows)
    assert got.value == pytest.approx(naive_wbc(target, reference, sizes), rel=1e-12)
    assert 0.0 <= got.value <= 1.0 and got.details["short_text"] == (n < max(sizes))


def test_the_default_windows_are_the_authors_list():
    assert get_method("wbc").make_params().sizes == (2, 3, 4, 6, 9, 13, 18, 25, 32, 40)


@pytest.mark.parametrize("given, sizes", [("2, 4", (2, 4)), ((3, 1), (3, 1)), (5, (5,)), ([7], (7,))])
def test_windows_come_as_text_numbers_or_a_list(given, sizes):
    assert get_method("wbc").make_params(windows=given).sizes == sizes


@pytest.mark.parametrize("bad", ["", "2,x", "0", "2,2", 2.5, (), (1, 0), True])
def test_bad_windows_are_refused(bad):
    with pytest.raises(ValueError, match="windows"):
        get_method("wbc").make_params(windows=bad)


def test_no_scored_token_and_a_non_finite_shift_are_errors():
    with pytest.raises(ValueError, match="no token to score"):  # the authors' code: 0.0
        wbc([], [])
    with pytest.raises(ValueError, match="not finite"):
        wbc([-1.0, -np.inf], [-1.0, -1.0])


def test_the_reference_runs_on_the_targets_ids(llama_lm, tok, make_lm):
    reference = make_lm(tiny_llama(len(tok), seed=6), tok)
    got = score_texts(llama_lm, TEXTS, ["wbc"], ref_model=reference, windows="2,5")["wbc"].to_numpy()
    for value, text in zip(got, TEXTS):
        ids = llama_lm.fed_ids(text)
        expected = naive_wbc(naive_stats(llama_lm.model, ids)["logprob"], naive_stats(reference.model, ids)["logprob"],
                             (2, 5))
        assert value == pytest.approx(expected, abs=1e-12)


def test_the_command_line_takes_the_reference_and_the_windows(tmp_path, monkeypatch):
    """`mia score --ref-model` gives EZ-MIA and WBC the same numbers as the Python API; a reference with another
    tokenizer ends in one clear error line, exit 2."""
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    target, reference = save_tiny_model(tmp_path / "target", seed=0), save_tiny_model(tmp_path / "ref", seed=2)
    other = tmp_path / "other"
    tiny_gpt2(len(tiny_tokenizer(280)), seed=1).save_pretrained(other)
    tiny_tokenizer(280).save_pretrained(other)
    src = tmp_path / "in.csv"
    pd.DataFrame({"text": TEXTS}).to_csv(src, index=False)
    common = ["score", "--model", target, "--input", src, "--output", tmp_path / "o.csv", "--methods", "ez_mia,wbc"]
    code, _, err = run_cli(*common, "--ref-model", reference, "--param", "windows=2,4")
    assert code == 0, err
    expected = score_texts(load_model(str(target)), TEXTS, ["ez_mia", "wbc"], ref_model=load_model(str(reference)),
                           windows=(2, 4))
    got = pd.read_csv(tmp_path / "o.csv")
    np.testing.assert_allclose(got[["ez_mia", "wbc"]].to_numpy(), expected.to_numpy(), rtol=1e-6)
    code, _, err = run_cli(*common, "--ref-model", other)
    assert code == 2 and err.strip().splitlines()[-1] == f"error: ez_mia {REFUSAL}"
