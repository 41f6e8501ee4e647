"""GDS: features by hand, batched = per-text loop, model left intact, classifier round trip, orientation."""
from __future__ import annotations

import copy
import json
import statistics

import numpy as np
import pandas as pd
import pytest
import torch

import mia_core.methods.gds.classifier as gds_module
from mia_core import LanguageModel, metrics, score, score_texts
from mia_core.model.forward import Segment, pack_batches
from mia_core.fitting import FitSplit, fit_supervised
from mia_core.methods.gds.classifier import GdsClassifier, fit_classifier, fit_mlp
from mia_core.methods.gds.features import (FEATURES, GdsSettings, encode, feature_names, features_loop, gradient_features,
                                          matrix_features, top_mask)
from mia_core.methods.labelled import split_record, stratified_split

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts, tiny_gpt2, tiny_llama, train_causal_lm

# lengths from 2 to ~40 tokens, so batches mix lengths and carry padding
TEXTS = ["Ember.", "The river was quietly built.", *random_texts(6, seed=11, min_words=3, max_words=30)]


def test_features_of_a_known_matrix_by_hand():
    g = torch.tensor([[0.5, -0.1, 0.0, 0.0, 0.2],
                      [0.0, 0.0, 0.0, 0.0, 0.0],
                      [-2.0, 0.0, 0.1, 0.0, 0.0],
                      [0.0, 0.0, 0.0, 1e-7, 3.0]], dtype=torch.float64)  # r = 4, h = 5
    got = dict(zip(FEATURES, matrix_features(g).tolist()))
    mags = [abs(v) for v in g.flatten().tolist()]
    row_means = [0.8 / 5, 0.0, 2.1 / 5, (3.0 + 1e-7) / 5]
    # top 10% of 20 entries = 2: |3.0| at row 4, col 5 and |2.0| at row 3, col 1 (1-based)
    expected = {
        "abs_mean": 5.9000001 / 20,
        "row_mean_max": (3.0 + 1e-7) / 5,
        "row_ecc": (abs(2 * 4 - 5) / 3 + abs(2 * 3 - 5) / 3) / 2,  # (1 + 1/3) / 2
        "col_ecc": (abs(2 * 5 - 6) / 4 + abs(2 * 1 - 6) / 4) / 2,  # (1 + 1) / 2
        "top10_ratio": 5.0 / 5.9000001,
        "sparsity": 14 / 20,  # 13 zeros and the 1e-7
        "std": statistics.pstdev(mags),
        "row_mean_std": statistics.pstdev(row_means),
    }
    for name in FEATURES:
        assert got[name] == pytest.approx(expected[name], rel=1e-12, abs=1e-15), name
    stacked = matrix_features(torch.stack([g, 2 * g.flip(0)]))  # leading batch dimensions
    np.testing.assert_array_equal(stacked[0].numpy(), matrix_features(g).numpy())
    np.testing.assert_allclose(stacked[1, 0].item(), 2 * expected["abs_mean"])
    assert stacked[1, 2].item() == pytest.approx(expected["row_ecc"])  # flipped rows: 3.0 in row 1, 2.0 in row 2


def test_top_set_equals_a_stable_descending_sort_with_ties():
    values = torch.tensor([[0.0, 3.0, 1.0, 3.0, 1.0, 1.0, 0.0, 2.0], [5.0, 5.0, 5.0, 5.0, 0.0, 0.0, 0.0, 0.0]])
    for k in range(1, 9):
        order = values.sort(dim=-1, descending=True, stable=True).indices[:, :k]
        expected = torch.zeros_like(values, dtype=torch.bool).scatter_(1, order, True)
        assert torch.equal(top_mask(values, k), expected), k


def test_all_zero_gradient_has_finite_features():
    values = dict(zip(FEATURES, matrix_features(torch.zeros(4, 6)).tolist()))
    assert all(np.isfinite(list(values.values())))
    assert values["top10_ratio"] == 0.0 and values["sparsity"] == 1.0 and values["abs_mean"] == 0.0


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_batched_features_equal_the_per_text_loop(arch, tok, make_lm):
    model = tiny_llama(len(tok), seed=0, logits_width=320) if arch == "llama" else tiny_gpt2(len(tok), seed=1)
    lm = make_lm(model, tok)
    budget = 96
    seqs = encode(lm, TEXTS, GdsSettings())
    batches = pack_batches([Segment(i, s, 1) for i, s in enumerate(seqs)], budget)
    assert any(len({len(seqs[i]) for i in b}) > 1 for b in batches)  # some batch really is padded
    loop = features_loop(lm, TEXTS)
    batched = gradient_features(lm, TEXTS, batch_tokens=budget)
    names = feature_names(model)
    n_matrices = 14 if arch == "llama" else 8  # 2 layers × (q,k,v,o,gate,up,down) or (c_attn, c_proj, c_fc, c_proj)
    assert loop.shape == batched.shape == (len(TEXTS), 8 * n_matrices) and len(names) == loop.shape[1]
    np.testing.assert_allclose(batched, loop, rtol=1e-5, atol=1e-12)
    abs_mean = loop[:, [i for i, n in enumerate(names) if n.endswith(".abs_mean")]]
    assert (abs_mean > 0).all() and np.ptp(abs_mean, axis=0).min() > 0  # real, text-dependent gradients


def test_float64_models_give_float64_gradients_on_both_paths(tok, make_lm):
    """A float64 model stays float64 through the head and the per-sample products: the paths agree to 1e-10."""
    lm = make_lm(tiny_llama(len(tok), seed=0, logits_width=320).double(), tok)
    loop = features_loop(lm, TEXTS)
    batched = gradient_features(lm, TEXTS, batch_tokens=96)
    np.testing.assert_allclose(batched, loop, rtol=1e-10, atol=1e-15)
    single = make_lm(tiny_llama(len(tok), seed=0, logits_width=320), tok)
    np.testing.assert_allclose(features_loop(single, TEXTS), loop, rtol=1e-3, atol=1e-7)  # same model in float32
    assert not np.array_equal(features_loop(single, TEXTS), loop)  # … but computed in another precision


def test_features_follow_the_core_boundary_policy(llama_lm):
    stats = llama_lm.token_stats(TEXTS[:3])
    seqs = encode(llama_lm, TEXTS[:3], GdsSettings())
    boundary = llama_lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    for s, st in zip(seqs, stats):
        assert s[0] == boundary and s[1:] == st.token_ids.tolist()  # every scored token is in the loss
    assert len(encode(llama_lm, [TEXTS[-1]], GdsSettings(max_tokens=5))[0]) == 5
    with pytest.raises(ValueError, match="no token to score"):
        encode(llama_lm, [""], GdsSettings(bos="none"))


def test_model_is_left_exactly_as_it_was(llama_lm):
    model = llama_lm.model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    modules = [(n, type(m)) for n, m in model.named_modules()]
    model.model.embed_tokens.weight.requires_grad_(False)  # a caller's own flags survive
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    rng = torch.get_rng_state()
    first = gradient_features(llama_lm, TEXTS[:3])
    assert torch.equal(torch.get_rng_state(), rng)
    assert [(n, type(m)) for n, m in model.named_modules()] == modules
    assert not any("lora" in n for n, _ in model.named_modules()) and not hasattr(model, "peft_config")
    state = model.state_dict()
    assert state.keys() == before.keys() and all(torch.equal(before[k], state[k]) for k in before)
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags and not model.training
    assert all(p.grad is None for p in model.parameters())
    np.testing.assert_array_equal(gradient_features(llama_lm, TEXTS[:3]), first)  # seeded A: same features
    assert not np.allclose(gradient_features(llama_lm, TEXTS[:3], GdsSettings(seed=1)), first)


def _synthetic(lm, n=48, seed=0):
    """Feature rows of this model's width with a class signal (fast: no gradients)."""
    rng = np.random.default_rng(seed)
    y = np.array([1, 0] * (n // 2))
    x = rng.normal(size=(n, len(feature_names(lm.model)))) + 0.8 * y[:, None]
    return x, y


def test_classifier_round_trip_and_spec_checks(llama_lm, gpt2_lm, make_lm, tok, tmp_path):
    x, y = _synthetic(llama_lm)
    train, test = stratified_split(y, train_fraction=0.5, seed=3)
    split = split_record(y, train, test, [f"t{i}" for i in range(len(y))], train_fraction=0.5, seed=3, source="synthetic")
    clf = fit_classifier(x[train], y[train], llama_lm, settings=GdsSettings(), seed=3, split=split)
    pipe = fit_mlp(x[train], y[train], seed=3)  # the same seeded sklearn fit
    np.testing.assert_allclose(clf.predict_proba(x[test]), pipe.predict_proba(x[test])[:, 1], rtol=1e-12, atol=1e-15)
    loaded = GdsClassifier.load(clf.save(tmp_path / "clf"))
    np.testing.assert_array_equal(loaded.predict_proba(x), clf.predict_proba(x))
    assert loaded.spec == json.loads(json.dumps(clf.spec)) and loaded.spec["split"]["train_ids"] == [f"t{i}" for i in train]
    assert loaded.spec["split"]["train_members"] == loaded.spec["split"]["train_nonmembers"] == 12
    assert "supervised" in loaded.describe() and "50% of synthetic" in loaded.describe()
    with np.load(tmp_path / "clf" / "mlp.npz", allow_pickle=False) as z:  # plain arrays only
        assert all(z[k].dtype == np.float64 for k in z.files)
    loaded.check(llama_lm)
    other = make_lm(tiny_llama(len(tok), seed=5, logits_width=320), tok)
    with pytest.raises(ValueError, match="fingerprint"):
        loaded.check(other)
    with pytest.raises(ValueError, match="LoRA settings"):
        loaded.check(llama_lm, GdsSettings(r=8))
    with pytest.raises(ValueError, match="fingerprint"):
        score("gds", gpt2_lm.token_stats(["A text."])[0], lm=gpt2_lm, classifier=tmp_path / "clf")
    (tmp_path / "clf" / "spec.json").write_text(json.dumps({**clf.spec, "feature_names": ["x"]}))
    with pytest.raises(ValueError, match="shapes"):
        GdsClassifier.load(tmp_path / "clf")
    with pytest.raises(FileNotFoundError, match="mia fit --method gds"):
        GdsClassifier.load(tmp_path / "nothing")


def test_split_is_stratified_seeded_and_refuses_too_few():
    y = np.array([1] * 30 + [0] * 50)
    train, test = stratified_split(y, train_fraction=0.3, seed=0)
    assert len(train) == 24 and y[train].sum() == 9 and set(train) | set(test) == set(range(80))
    assert np.array_equal(train, stratified_split(y, train_fraction=0.3, seed=0)[0])
    assert not np.array_equal(train, stratified_split(y, train_fraction=0.3, seed=1)[0])
    with pytest.raises(ValueError, match="at least 6"):
        stratified_split(y[:40], train_fraction=0.2)
    with pytest.raises(ValueError, match="both members"):
        stratified_split(np.ones(20))


@pytest.fixture(scope="module")
def memorised(membership):
    """The `membership` model trained 40 steps more on its members (a copy): GDS needs members whose
    loss is near its minimum, where their gradients shrink (paper §3.1); 40 steps leave it weak."""
    lm = membership["lm"]
    model = train_causal_lm(copy.deepcopy(lm.model), lm.tokenizer, membership["members"], steps=40, lr=5e-3)
    return LanguageModel(model, lm.tokenizer, name="tiny-memorised", stats_cache=lm.stats_cache)


def test_members_score_higher_on_the_held_out_part(memorised, membership, monkeypatch, tmp_path):
    """Orientation: fitted on half of the known-membership toy set, GDS ranks the other half correctly."""
    lm, members, nonmembers = memorised, membership["members"], membership["nonmembers"]
    texts, labels = members + nonmembers, np.array([1] * 40 + [0] * 40)
    fitted = fit_supervised(lm, "gds", texts, labels, split=FitSplit(0.5, seed=0), source="membership", score_all=True)
    test_labels, test_scores = labels[fitted.test_idx], fitted.scores[fitted.test_idx]
    assert fitted.record["n_train"] == 40 and len(fitted.test_idx) == 40
    assert test_scores[test_labels == 1].mean() > test_scores[test_labels == 0].mean()
    assert metrics.auroc(test_labels, test_scores) > 0.8
    # the registered method gives the same scores through score_texts (features of these 6 texts batched alone)
    clf = fitted.value
    held_out = [texts[i] for i in fitted.test_idx[:6]]
    calls = []
    real = gds_module.gradient_features
    monkeypatch.setattr(gds_module, "gradient_features", lambda lm_, texts_, *a, **kw: calls.append(len(texts_)) or
                        real(lm_, texts_, *a, **kw))
    df = score_texts(lm, held_out, ["gds"], classifier=clf)
    assert calls == [6]  # one batched feature call for all texts, from `prepare`
    np.testing.assert_allclose(df["gds"], test_scores[:6], rtol=1e-4, atol=1e-4)
    one = score("gds", lm.token_stats(held_out[:1])[0], lm=lm, classifier=clf)
    assert one.value == pytest.approx(test_scores[0], rel=1e-4, abs=1e-4)
    assert 0 < one.details["member_probability"] < 1 and "supervised" in one.details["supervised"]
    assert not one.details["in_training_split"]
    trained = score("gds", lm.token_stats([texts[fitted.train_idx[0]]])[0], lm=lm, classifier=clf)
    assert trained.details["in_training_split"] and len(clf.spec["split"]["train_sha256"]) == 40
    # its settings given when scoring must be the classifier's own: never accepted and ignored
    with pytest.raises(ValueError, match="fitted with LoRA settings"):
        score_texts(lm, held_out[:1], ["gds"], classifier=clf, max_tokens=8)
    with pytest.raises(ValueError, match="fitted with LoRA settings"):
        score_texts(lm, held_out[:1], ["gds"], classifier=clf, lora_alpha=3)
    same = score_texts(lm, held_out[:1], ["gds"], classifier=clf, max_tokens=clf.settings.max_tokens,
                       lora_r=clf.settings.r)
    np.testing.assert_allclose(same["gds"], df["gds"][:1], rtol=1e-4, atol=1e-4)
    saved = clf.save(tmp_path / "clf")  # a folder is loaded by the method's own loader (the need's supplier)
    again = score_texts(lm, held_out[:2], ["gds"], classifier=str(saved))
    np.testing.assert_allclose(again["gds"], df["gds"][:2], rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def memorised_dir(memorised, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-memorised")
    memorised.model.save_pretrained(folder)
    memorised.tokenizer.save_pretrained(folder)
    return folder


def test_cli_fit_eval_and_score(memorised_dir, membership, tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    texts = membership["members"] + membership["nonmembers"]
    src = tmp_path / "labelled.jsonl"
    src.write_text("\n".join(json.dumps({"id": f"t{i}", "text": t, "label": int(i < 40)}) for i, t in enumerate(texts)))
    code, out, err = run_cli("eval", "--model", memorised_dir, "--input", src, "--output", tmp_path / "m.json",
                             "--methods", "gds", "--fit", "0.5", "--scores-output", tmp_path / "s.csv", "--n-boot",
                             "200")
    assert code == 0, err
    report = json.loads((tmp_path / "m.json").read_text())
    scores = pd.read_csv(tmp_path / "s.csv")
    scores = scores[~scores["in_training_split"]].reset_index(drop=True)  # the held-out rows
    assert report["split"]["n_train"] == 40 and report["split"]["train_fraction"] == 0.5 and len(scores) == 40
    assert report["gds"]["auroc"] == pytest.approx(metrics.auroc(scores["label"], scores["gds"]))
    assert "supervised" in out and "40 labelled texts" in out and report["gds"]["auroc"] > 0.8
    clf_dir = tmp_path / "clf"
    code, out, err = run_cli("fit", "--method", "gds", "--model", memorised_dir, "--input", src, "--output", clf_dir,
                             "--train-fraction", "0.5")
    assert code == 0, err
    spec = json.loads((clf_dir / "spec.json").read_text())
    assert spec["split"]["train_ids"] == [f"t{i}" for i in stratified_split(np.array([1] * 40 + [0] * 40),
                                                                          train_fraction=0.5)[0]]
    few = tmp_path / "few.jsonl"  # a few held-out texts, scored by `mia score` with the saved classifier
    few.write_text("\n".join(json.dumps({"id": i, "text": texts[int(i[1:])]}) for i in scores["id"][:5]))
    code, _, err = run_cli("score", "--model", memorised_dir, "--input", few, "--output", tmp_path / "g.csv",
                           "--methods", "gds", "--param", f"classifier={clf_dir}")
    assert code == 0, err
    got = pd.read_csv(tmp_path / "g.csv")
    assert got["id"].tolist() == scores["id"][:5].tolist()  # same fit and features as in eval
    np.testing.assert_allclose(got["gds"], scores["gds"][:5], rtol=1e-4, atol=1e-4)
    # `mia eval` with the classifier leaves its training rows out, for every method
    code, _, err = run_cli("eval", "--model", memorised_dir, "--input", src, "--output", tmp_path / "e.json",
                           "--methods", "loss,gds", "--param", f"classifier={clf_dir}", "--n-boot", "200",
                           "--scores-output", tmp_path / "e.csv")
    assert code == 0, err
    assert "40 of 80 texts" in err
    evaluated = json.loads((tmp_path / "e.json").read_text())
    assert evaluated["run"]["excluded_training_rows"] == 40 and evaluated["n_members"] == 20
    assert evaluated["gds"]["auroc"] == pytest.approx(report["gds"]["auroc"], abs=1e-6)  # the same held-out rows
    rows = pd.read_csv(tmp_path / "e.csv")
    assert sorted(rows.loc[~rows["in_training_split"], "id"]) == sorted(scores["id"])
    code, _, err = run_cli("eval", "--model", memorised_dir, "--input", src, "--output", tmp_path / "x.json",
                           "--methods", "gds", "--fit", "1.5")
    assert code == 2 and err.strip().startswith("error: ") and "1.5" in err
