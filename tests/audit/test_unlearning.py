"""Unlearning audit: chunking and ratio arithmetic by hand, both models against the naive oracle,
retraining without a forget set as the known answer, two tokenizers, the CLI.
The page: tests/app/test_unlearning.py."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mia_core import LanguageModel, load_model
from mia_core.audit.snippets import word_chunks as chunk_text
from mia_core.audit.unlearning import UnlearningParams, audit_unlearning, make_chunks, ratio_table
from mia_core.model.stats_cache import StatsCache

from tests.support.cli_runner import run_cli
from tests.support.oracle import naive_min_k, naive_stats
from tests.support.tiny import tiny_llama, tiny_tokenizer, train_causal_lm


def naive_score(lm, text, k=0.2):
    ids = [lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")] + lm.tokenizer(text)["input_ids"]
    return naive_min_k(naive_stats(lm.model, ids)["logprob"], k)


@pytest.fixture(scope="module")
def retrained(membership, tmp_path_factory):
    """Exact unlearning of the first 20 members: the same recipe retrained on the other 20 only."""
    tok = membership["lm"].tokenizer
    model = train_causal_lm(tiny_llama(len(tok), seed=1), tok, membership["members"][20:], steps=40, lr=5e-3)
    return LanguageModel(model, tok, name="tiny-retrained", stats_cache=StatsCache(tmp_path_factory.mktemp("retrained")))


def test_chunks_by_words_keep_the_original_text():
    text = "One two\nthree  four five\tsix seven"
    assert chunk_text(text, 3) == [(0, 13, 3), (15, 28, 3), (29, 34, 1)]
    assert [text[a:b] for a, b, _ in chunk_text(text, 3)] == ["One two\nthree", "four five\tsix", "seven"]
    assert chunk_text("   ", 3) == []
    chunks = make_chunks(["a b c d e", "f"], chunk_words=2, sources=["x", "y"])
    assert chunks["chunk_id"].tolist() == ["x#0", "x#1", "x#2", "y#0"]
    assert chunks["text"].tolist() == ["a b", "c d", "e", "f"] and chunks["n_words"].tolist() == [2, 2, 1, 1]
    with pytest.raises(ValueError, match="every text is empty"):
        make_chunks([" ", ""])


def test_ratio_band_sign_and_rank_by_hand():
    chunks = pd.DataFrame({"chunk_id": list("abcdefg")})
    original = [-2.0, -2.0, -2.0, 1.0, 0.0, -2.0, -1.0]
    unlearned = [-2.2, -3.0, -1.8, -1.0, 0.5, -2.0, -1.15]
    table = ratio_table(chunks, original, unlearned, band=1.15)
    # ratios 1.1, 1.5, 0.9, −1 (sign change), inf (x/0), 1.0, 1.15 (on the band's edge: open interval)
    by_id = table.set_index("chunk_id")
    np.testing.assert_allclose(by_id.loc[list("abcf"), "ratio"], [1.1, 1.5, 0.9, 1.0])
    assert by_id.loc["d", "ratio"] == -1.0 and math.isinf(by_id.loc["e", "ratio"])
    assert table["chunk_id"].tolist()[:4] == ["f", "a", "c", "g"]  # |ln r| = 0, 0.0953, 0.1054, 0.1398
    assert set(table.loc[table["suspect"], "chunk_id"]) == {"a", "c", "f"}
    assert table["rank"].tolist() == list(range(1, 8)) and table["suspect"].tolist()[:3] == [True] * 3
    assert set(table["chunk_id"].tolist()[-3:]) == {"b", "d", "e"} and np.isinf(table["abs_log_ratio"].iloc[-2:]).all()
    assert set(ratio_table(chunks, original, unlearned, band=1.2).loc[lambda t: t["suspect"], "chunk_id"]) == set("acfg")
    with pytest.raises(ValueError, match="band must be greater than 1"):
        ratio_table(chunks, original, unlearned, band=1.0)


def test_audit_against_naive_scores_and_exact_unlearning(membership, retrained):
    original, members = membership["lm"], membership["members"]
    forget, retain = members[:20], members[20:]
    table = audit_unlearning(original, retrained, forget + retain, sources=[f"f{i}" for i in range(20)] +
                             [f"r{i}" for i in range(20)], params=UnlearningParams(chunk_words=64))
    assert len(table) == 40  # texts of ≤ 24 words: one chunk each
    by_text = table.set_index("text")
    expected_orig = np.array([naive_score(original, t) for t in forget + retain])
    expected_unl = np.array([naive_score(retrained, t) for t in forget + retain])
    np.testing.assert_allclose(by_text.loc[forget + retain, "score_original"], expected_orig, rtol=1e-5)
    np.testing.assert_allclose(by_text.loc[forget + retain, "score_unlearned"], expected_unl, rtol=1e-5)
    ratio = expected_unl / expected_orig
    np.testing.assert_allclose(by_text.loc[forget + retain, "ratio"], ratio, rtol=1e-5)
    suspects = {t for t, r in zip(forget + retain, ratio) if 1 / 1.15 < r < 1.15}
    assert set(table.loc[table["suspect"], "text"]) == suspects
    assert table["text"].tolist() == [(forget + retain)[i] for i in np.argsort(np.abs(np.log(ratio)), kind="stable")]
    # retraining without the forget set is unlearning that worked: forgotten chunks move, retained ones do not
    is_forget = table["source"].str.startswith("f")
    assert table.loc[is_forget, "suspect"].mean() <= 0.2 and table.loc[~is_forget, "suspect"].mean() >= 0.6
    assert table.loc[is_forget, "abs_log_ratio"].median() > 2 * table.loc[~is_forget, "abs_log_ratio"].median()


def test_each_model_scores_with_its_own_tokenizer(membership, gpt2_lm):
    text = " ".join(membership["nonmembers"][:4])
    table = audit_unlearning(membership["lm"], gpt2_lm, [text], params=UnlearningParams(chunk_words=20, k=0.5))
    assert gpt2_lm.tokenizer.vocab_size != membership["lm"].tokenizer.vocab_size
    chunks = [text[a:b] for a, b, _ in chunk_text(text, 20)]
    assert sorted(table["chunk"]) == list(range(len(chunks))) and len(chunks) >= 3
    for row in table.itertuples():
        assert row.text == chunks[row.chunk]
        assert row.score_original == pytest.approx(naive_score(membership["lm"], row.text, 0.5), rel=1e-5)
        assert row.score_unlearned == pytest.approx(naive_score(gpt2_lm, row.text, 0.5), rel=1e-5)


def test_method_parameters_reach_the_method(membership, retrained):
    """SURP with e_max = 100 nats counts every one of its k lowest tokens as surprising: its score is then the min-k
    mean, by hand; with e_max = 1e-6 none is, and every score is SURP's empty-selection sentinel −100. k comes from
    the audit's settings, e_max from `method_params`."""
    texts = membership["members"][:3]
    settings = UnlearningParams(chunk_words=64, method="surp", k=0.5)
    table = audit_unlearning(membership["lm"], retrained, texts, params=settings, method_params={"e_max": 100.0})
    by_text = table.set_index("text")
    for text in texts:
        assert by_text.loc[text, "score_original"] == pytest.approx(naive_score(membership["lm"], text, 0.5), rel=1e-5)
        assert by_text.loc[text, "score_unlearned"] == pytest.approx(naive_score(retrained, text, 0.5), rel=1e-5)
    none = audit_unlearning(membership["lm"], retrained, texts, params=settings, method_params={"e_max": 1e-6})
    assert (none[["score_original", "score_unlearned"]] == -100.0).all().all()


def test_params_are_checked():
    with pytest.raises(ValueError, match="only the model's statistics"):
        UnlearningParams(method="dc_pdd")
    with pytest.raises(ValueError, match="band"):
        UnlearningParams(band=0.87)
    with pytest.raises(ValueError, match="chunk_words"):
        UnlearningParams(chunk_words=0)
    with pytest.raises(KeyError, match="available"):
        UnlearningParams(method="mink")


@pytest.fixture
def model_dirs(membership, retrained, tmp_path):
    dirs = []
    for name, lm in (("original", membership["lm"]), ("unlearned", retrained)):
        lm.model.save_pretrained(tmp_path / name)
        lm.tokenizer.save_pretrained(tmp_path / name)
        dirs.append(tmp_path / name)
    return dirs


def test_cli_writes_the_same_table(model_dirs, membership, tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    texts = membership["members"][15:25]
    src = tmp_path / "texts.csv"
    pd.DataFrame({"id": [f"t{i}" for i in range(10)], "body": texts}).to_csv(src, index=False)
    code, out, err = run_cli("audit-unlearning", "--original", model_dirs[0], "--unlearned", model_dirs[1],
                             "--input", src, "--text-column", "body", "--output", tmp_path / "a.csv",
                             "--chunk-words", 10, "--band", 1.2)
    assert code == 0, err
    got = pd.read_csv(tmp_path / "a.csv", keep_default_na=False)
    expected = audit_unlearning(load_model(str(model_dirs[0])), load_model(str(model_dirs[1])), texts,
                                sources=[f"t{i}" for i in range(10)], params=UnlearningParams(chunk_words=10, band=1.2))
    assert got["chunk_id"].tolist() == expected["chunk_id"].tolist()
    np.testing.assert_allclose(got["ratio"], expected["ratio"], rtol=1e-6)
    assert got["suspect"].tolist() == expected["suspect"].tolist()
    assert f"{int(expected['suspect'].sum())} of {len(expected)} chunks are suspects" in out


@pytest.mark.parametrize("option, value, needle", [("--band", "0.9", "--band must be greater than 1"),
                                                   ("--method", "dc_pdd", "--method dc_pdd needs"),
                                                   ("--chunk-words", "0", "--chunk-words"),
                                                   ("--method", "mink", "available")])
def test_cli_bad_options_fail_before_loading(option, value, needle, tmp_path):
    src = tmp_path / "ok.txt"
    src.write_text("some words to chunk")
    code, _, err = run_cli("audit-unlearning", "--original", "no-such-model", "--unlearned", "no-such-model",
                           "--input", src, "--output", tmp_path / "o.csv", option, value)
    assert code == 2 and needle in err and "loading model" not in err and err.startswith("error: ")
