"""Sliding-window (online) detection: windows by hand, window scores against naive slices of the
oracle's full-context statistics, labelling from passages, AUROC on a known-membership model, the CLI.
The page: tests/app/test_online.py."""
from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import pytest

from mia_core import metrics
from mia_core.audit.online import (
    OnlineParams, detect_online, join_passages, label_windows, window_auroc, window_bounds, window_scores, window_view,
)

from tests.support.cli_runner import run_cli
from tests.support.oracle import naive_min_k, naive_stats
from tests.support.tiny import random_texts


def test_window_bounds_by_hand():
    assert window_bounds(70, 32) == [(0, 32), (32, 64), (64, 70)]
    assert window_bounds(64, 32) == [(0, 32), (32, 64)]
    assert window_bounds(70, 32, 16) == [(0, 32), (16, 48), (32, 64), (48, 70)]
    assert window_bounds(10, 32) == [(0, 10)]
    assert window_bounds(0, 32) == []
    with pytest.raises(ValueError, match="stride"):
        window_bounds(10, 4, 5)
    with pytest.raises(ValueError, match="stride"):
        OnlineParams(window=8, stride=0)
    with pytest.raises(ValueError, match="only the model's statistics"):
        OnlineParams(method="dc_pdd")


@pytest.mark.parametrize("window, stride", [(16, None), (12, 5)])
def test_window_scores_are_the_methods_on_naive_slices(llama_lm, window, stride):
    text = " ".join(random_texts(2, seed=3))
    ids = [llama_lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")] + llama_lm.tokenizer(text)["input_ids"]
    assert 3 * window < len(ids) - 1 < llama_lm.max_length  # one context: every token has its full left context
    oracle = naive_stats(llama_lm.model, ids)
    z = (oracle["logprob"] - oracle["mu"]) / oracle["sigma"]
    for method, k in (("min_k_pp", 0.2), ("min_k", 0.5), ("loss", 0.2), ("zlib", 0.2)):
        stats, table = detect_online(llama_lm, text, OnlineParams(window=window, stride=stride, method=method, k=k))
        step = stride or window
        starts = list(range(0, len(ids) - 1, step))
        starts = starts[: next(i for i, s in enumerate(starts) if s + window >= len(ids) - 1) + 1]
        assert table["token_start"].tolist() == starts
        for row in table.itertuples():
            a, b = row.token_start, row.token_end
            assert b - a == min(window, len(ids) - 1 - a)
            assert row.text == "".join(stats.tokens[a:b])  # the window's own span of the text
            expected = {"min_k_pp": lambda: naive_min_k(z[a:b], k), "min_k": lambda: naive_min_k(oracle["logprob"][a:b], k),
                        "loss": lambda: oracle["logprob"][a:b].mean(),
                        "zlib": lambda: oracle["logprob"][a:b].mean() / len(zlib.compress(row.text.encode()))}[method]()
            assert row.score == pytest.approx(expected, rel=5e-5, abs=1e-6), (method, a, b)  # float32 statistics


def test_window_view_is_a_self_contained_token_stats(llama_lm):
    text = "The castle by the river.\nA galaxy of seventeen comets."
    stats = llama_lm.token_stats([text])[0]
    view = window_view(stats, 3, 9)
    a, b = view.extra["char_span"]
    assert view.text == text[a:b] and view.n_scored == 6
    assert [view.text[s:e] for s, e in view.offsets] == stats.tokens[3:9]
    np.testing.assert_array_equal(view.logprob, stats.logprob[3:9])
    with pytest.raises(ValueError, match="outside"):
        window_view(stats, 5, stats.n_scored + 1)


def test_windows_take_the_label_of_their_majority_passage(llama_lm):
    passages = ["Castle river engine protein galaxy.", "Violin harbour orchard senate glacier comet lantern.",
                "Merchant."]
    text, spans = join_passages(passages, [0, 1, 0], sep=" | ")
    assert [text[a:b] for a, b, _ in spans] == passages and [s[2] for s in spans] == [0, 1, 0]
    stats = llama_lm.token_stats([text])[0]
    table = window_scores(stats, OnlineParams(window=6, stride=3))
    got = label_windows(stats, table, spans)

    def owner(t):  # the passage a token overlaps most, by brute force over characters
        a, b = stats.offsets[t]
        counts = [len(set(range(a, b)) & set(range(s, e))) for s, e, _ in spans]
        return int(np.argmax(counts)) if max(counts) else None

    for row, label in zip(table.itertuples(), got):
        owners = [o for o in map(owner, range(row.token_start, row.token_end)) if o is not None]
        if not owners:
            assert label == -1
            continue
        counts = [owners.count(i) for i in range(len(spans))]
        assert label == spans[counts.index(max(counts))][2]  # ties: the earlier passage
    assert set(got) >= {0, 1}


def test_window_auroc_on_a_known_membership_model(membership):
    pairs = list(zip(membership["nonmembers"][:10], membership["members"][:10]))
    passages = [p for pair in pairs for p in pair]  # the paper's order: a non-member, then a member
    text, spans = join_passages(passages, [0, 1] * 10, sep=" ")
    stats, table = detect_online(membership["lm"], text, OnlineParams(window=16))
    labels = label_windows(stats, table, spans)
    assert (labels >= 0).all() and 0.3 < labels.mean() < 0.7
    auc = window_auroc(table, labels)
    assert auc == pytest.approx(metrics.auroc(labels, table["score"].to_numpy()))
    assert auc > 0.6


@pytest.fixture
def model_dir(membership, tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    membership["lm"].model.save_pretrained(tmp_path / "model")
    membership["lm"].tokenizer.save_pretrained(tmp_path / "model")
    return tmp_path / "model"


def test_cli_labelled_passages_give_window_labels_and_auroc(model_dir, membership, tmp_path):
    passages = [p for pair in zip(membership["nonmembers"][:6], membership["members"][:6]) for p in pair]
    src = tmp_path / "passages.jsonl"
    pd.DataFrame({"text": passages, "label": [0, 1] * 6}).to_json(src, orient="records", lines=True)
    code, out, err = run_cli("audit-online", "--model", model_dir, "--input", src, "--output", tmp_path / "w.csv",
                             "--window", 16, "--label-column", "label")
    assert code == 0, err
    got = pd.read_csv(tmp_path / "w.csv", keep_default_na=False)
    text, spans = join_passages(passages, [0, 1] * 6)
    stats, expected = detect_online(membership["lm"], text, OnlineParams(window=16))
    np.testing.assert_allclose(got["score"], expected["score"], rtol=1e-5)
    assert got["label"].tolist() == label_windows(stats, expected, spans).tolist()
    assert f"{window_auroc(expected, got['label']):.4f}" in out


def test_cli_scores_each_text_and_rejects_bad_windows(model_dir, tmp_path):
    src = tmp_path / "texts.csv"
    pd.DataFrame({"id": ["a", "b"], "text": random_texts(2, seed=9, min_words=20)}).to_csv(src, index=False)
    code, _, err = run_cli("audit-online", "--model", model_dir, "--input", src, "--output", tmp_path / "w.csv",
                           "--window", 8, "--method", "min_k")
    assert code == 0, err
    got = pd.read_csv(tmp_path / "w.csv")
    assert set(got["id"]) == {"a", "b"} and (got["n_tokens"] <= 8).all()
    for option, needle in ((["--window", "0"], "--window"), (["--window", "8", "--stride", "9"], "--stride"),
                           (["--method", "lowercase"], "--method")):
        code, _, err = run_cli("audit-online", "--model", "no-such-model", "--input", src, "--output",
                               tmp_path / "o.csv", *option)
        assert code == 2 and err.startswith("error: ") and needle in err and "loading model" not in err
