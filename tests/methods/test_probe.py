"""Probe: last-token block outputs against output_hidden_states, the probes against a float64 AdamW written here,
save → load without pickle, the fingerprint check, the spec's edge cases, and orientation on the known-membership toy."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from mia_core import LanguageModel, load_model, metrics, score, score_texts
from mia_core.model.stats_cache import StatsCache
from mia_core.fitting import FitSplit, fit_supervised
from mia_core.methods.gds.classifier import GdsClassifier
from mia_core.methods.probe import ProbeParams
from mia_core.methods.probe.activations import PROMPT, last_token_features, wrapped_ids
from mia_core.methods.probe.fitted import ProbeFit
from mia_core.methods.probe.proxy import proxy_model
from mia_core.methods.probe.linear import standardize, standardizer, train_probes
from mia_core.methods.probe.train import fit_probe, split_aux

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts, save_tiny_model, tiny_gpt2, tiny_llama, tiny_tokenizer

#: A short proxy fine-tune that makes its 5 texts members of the tiny proxy.
SETTINGS = {"lr": 1e-2, "epochs": 4, "batch_size": 5}
TEXTS = ["Ember.", "The river was quietly built.", *random_texts(9, seed=5, min_words=3, max_words=30)]


def test_features_are_each_blocks_output_at_the_last_real_token(tok, make_lm):
    """Batched, right-padded features = a float64 per-text pass read with output_hidden_states at position −1; the last
    block's output is read before the final norm (replaced by the identity in the oracle)."""
    model = tiny_llama(len(tok), seed=0)
    got = last_token_features(model, tok, TEXTS, max_tokens=512, pad_id=0)  # 8 texts per batch: padded
    oracle_model = copy.deepcopy(model).double()
    oracle_model.model.norm = nn.Identity()
    for i, text in enumerate(TEXTS):
        ids = torch.tensor([tok(PROMPT.format(text=text))["input_ids"]])
        with torch.no_grad():
            hidden = oracle_model(input_ids=ids, output_hidden_states=True).hidden_states  # L + 1 × (1, T, d)
        expected = np.stack([h[0, -1].numpy() for h in hidden[1:]])  # (L, d): block l's output = entry l + 1
        np.testing.assert_allclose(got[i], expected, rtol=1e-4, atol=1e-5)
    normed = model(input_ids=torch.tensor([tok(PROMPT.format(text=TEXTS[0]))["input_ids"]]),
                   output_hidden_states=True).hidden_states[-1][0, -1].detach().numpy()
    assert not np.allclose(got[0, -1], normed, atol=1e-3)  # not the final norm's output
    gpt2 = last_token_features(tiny_gpt2(len(tok), seed=1), tok, TEXTS[:3], max_tokens=512, pad_id=0)
    assert gpt2.shape == (3, 2, 32) and np.isfinite(gpt2).all()  # found GPT-2's blocks too


def test_long_texts_keep_the_prompts_tail(tok):
    ids = wrapped_ids(tok, " ".join(["river"] * 200), 40)
    tail = tok(PROMPT.split("{text}")[1], add_special_tokens=False)["input_ids"]
    assert len(ids) == 40 and ids[-len(tail):] == tail
    with pytest.raises(ValueError, match="must exceed the prompt's tail"):
        wrapped_ids(tok, " ".join(["river"] * 200), len(tail))


def adamw_probe_oracle(x: np.ndarray, y: np.ndarray, epochs: int, lr=1e-3, wd=0.1, b1=0.9, b2=0.999, eps=1e-8):
    """One layer's σ(wᵀx) without bias, full-batch mean BCE, AdamW (decoupled decay) from w = 0, in float64 numpy."""
    w, m, v = np.zeros(x.shape[1]), np.zeros(x.shape[1]), np.zeros(x.shape[1])
    for t in range(1, epochs + 1):
        p = 1 / (1 + np.exp(-(x @ w)))
        g = x.T @ (p - y) / len(y)
        w = w * (1 - lr * wd)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return w


def test_probes_equal_a_float64_adamw_per_layer():
    rng = np.random.default_rng(0)
    y = np.array([1, 0] * 15)
    raw = rng.normal(size=(30, 3, 5)) + 0.7 * y[:, None, None] * rng.normal(size=(3, 5))
    raw[:, 1, 2] = 4.0  # a zero-std dimension: dropped
    mean, std, keep = standardizer(raw)
    np.testing.assert_allclose(mean, raw.mean(0)) and np.testing.assert_allclose(std, raw.std(0))
    assert not keep[1, 2] and keep.sum() == 14
    z = standardize(raw, mean, std, keep)
    assert np.isfinite(z).all() and (z[:, 1, 2] == 0).all()
    np.testing.assert_allclose(z[:, 0], (raw[:, 0] - raw[:, 0].mean(0)) / raw[:, 0].std(0))
    weights = train_probes(z, y)  # 1000 epochs, all layers at once
    for layer in range(3):
        np.testing.assert_allclose(weights[layer], adamw_probe_oracle(z[:, layer], y, 1000), rtol=1e-9, atol=1e-12)
    assert weights[1, 2] == 0.0


def test_aux_split_is_seeded_halves_with_a_stratified_dev_set():
    is_a, train, dev = split_aux(20, seed=3)
    assert is_a.sum() == 10 and len(train) == 14 and len(dev) == 6 and set(train) | set(dev) == set(range(20))
    assert is_a[dev].sum() == 3 and np.array_equal(split_aux(20, seed=3)[0], is_a)
    assert not np.array_equal(split_aux(20, seed=4)[0], is_a)


@pytest.fixture(scope="module")
def fitted_probe(tmp_path_factory):
    """Probe fitted on a tiny Llama with half of 40 labelled texts: D_aux = its 10 non-members (a warning: under 200)."""
    lm = LanguageModel(tiny_llama(len(tiny_tokenizer(300)), seed=2), tiny_tokenizer(300), name="tiny",
                       stats_cache=StatsCache(tmp_path_factory.mktemp("stats")))
    texts, labels = random_texts(40, seed=8), np.array([1, 0] * 20)
    with pytest.warns(UserWarning, match="10 known non-members"):
        fitted = fit_supervised(lm, "probe", texts, labels, split=FitSplit(0.5, seed=0), source="toy",
                                params=SETTINGS, score_all=True)
    return lm, texts, labels, fitted


def test_members_score_higher_on_the_held_out_part(fitted_probe, make_lm):
    """Orientation (never negated): scored under its own proxy, the proxy's members (A) rank above B, the probe's
    held-out dev rows included. (Transfer to the target is the method's bet, not a sign convention: on this toy set,
    whose members were learned unwrapped, the held-out AUROC is not reliably above 0.5.)"""
    lm, texts, labels, fitted = fitted_probe
    spec = fitted.value.spec
    aux = [texts[i] for i in fitted.train_idx if labels[i] == 0]
    is_a = split_aux(len(aux), seed=0)[0]
    settings = ProbeParams(**SETTINGS).settings()
    proxy = proxy_model(lm.model, lm.tokenizer, [t for t, a in zip(aux, is_a) if a], lora_r=settings.lora_r,
                        lr=settings.lr, epochs=settings.epochs, batch_size=settings.batch_size, max_tokens=512,
                        pad_id=lm.pad_id, seed=0)
    proxy_lm = make_lm(proxy.merge_and_unload(), lm.tokenizer)
    as_proxy = dataclasses.replace(fitted.value, spec={**spec, "model": {**spec["model"],
                                                                         "fingerprint": proxy_lm.fingerprint}})
    logits = as_proxy.score_texts(proxy_lm, aux, norm="scored_set")
    assert metrics.auroc(is_a, logits) > 0.6  # negated, it would be 1 minus this
    assert spec["aux"]["n"] == 10 and spec["aux"]["n_a"] == 5 and spec["layer"] == int(np.argmax(spec["dev_auc"]))


def test_registered_scores_round_trip_and_checks(fitted_probe, make_lm, tok, tmp_path):
    lm, texts, labels, fitted = fitted_probe
    probe = fitted.value
    held = [texts[i] for i in fitted.test_idx[:5]]
    df = score_texts(lm, held, ["probe"], classifier=probe)
    np.testing.assert_allclose(df["probe"], fitted.scores[fitted.test_idx[:5]], rtol=1e-6, atol=1e-6)
    # by hand: the target's layer-l* features, standardized by D_aux's target statistics, times w
    aux = [texts[i] for i in fitted.train_idx if labels[i] == 0]
    feats = last_token_features(lm.model, lm.tokenizer, aux + held, max_tokens=512, pad_id=lm.pad_id)[:, probe.layer]
    mean, std = feats[:10].astype(np.float64).mean(0), feats[:10].astype(np.float64).std(0)
    np.testing.assert_allclose(df["probe"], ((feats[10:] - mean) / std) @ probe.weights, rtol=1e-5, atol=1e-5)
    # norm="scored_set": each scored set standardized by its own statistics (the authors')
    own = score_texts(lm, held, ["probe"], classifier=probe, norm="scored_set")["probe"]
    np.testing.assert_allclose(own, ((feats[10:] - feats[10:].mean(0)) / feats[10:].std(0)) @ probe.weights,
                               rtol=1e-4, atol=1e-4)
    # saved as JSON + npz (no pickle), loaded back: identical scores, and through a folder path
    folder = probe.save(tmp_path / "probe")
    assert sorted(p.name for p in folder.iterdir()) == ["probe.npz", "spec.json"]
    with np.load(folder / "probe.npz", allow_pickle=False) as z:
        assert sorted(z.files) == ["keep", "mean", "std", "weights"]
    again = ProbeFit.load(folder)
    np.testing.assert_array_equal(score_texts(lm, held, ["probe"], classifier=str(folder))["probe"], df["probe"])
    assert again.spec == probe.spec
    one = score("probe", lm.token_stats(held[:1])[0], lm=lm, classifier=again)
    assert one.value == pytest.approx(df["probe"][0], abs=1e-9) and not one.details["in_training_split"]
    assert one.details["layer"] == probe.layer and "known non-members" in one.details["supervised"]
    # another model's fit is refused; so is a GDS folder, and settings that are not the fit's own
    other = make_lm(tiny_llama(len(tok), seed=9), tok)
    with pytest.raises(ValueError, match="fitted on model"):
        score_texts(other, held[:1], ["probe"], classifier=again)
    GdsClassifier({"format": "mia-lens-gds-classifier/1"}, *[np.zeros(1)] * 2, (), ()).save(tmp_path / "gds")
    with pytest.raises(FileNotFoundError, match="no probe"):
        ProbeFit.load(tmp_path / "gds")
    with pytest.raises(ValueError, match="fitted with"):
        score_texts(lm, held[:1], ["probe"], classifier=again, lr=0.5)


def test_too_few_known_nonmembers_and_bad_parameters_are_refused(llama_lm):
    with pytest.raises(ValueError, match="at least 8 known non-members"):
        fit_probe(llama_lm, TEXTS[:7], ProbeParams().settings(), seed=0, split={}, source="x")
    with pytest.raises(ValueError, match="norm"):
        ProbeParams(norm="batch")
    with pytest.raises(ValueError, match="lora_r"):
        ProbeParams(lora_r=-1)


def test_cli_fit_then_score_with_the_saved_probe(tmp_path):
    """`mia fit --method probe` saves a fit that `mia score --param classifier=DIR` uses; a bad fit folder is one error."""
    model = save_tiny_model(tmp_path / "model", seed=2)
    labelled = tmp_path / "labelled.csv"
    pd.DataFrame({"text": random_texts(40, seed=8), "label": [1, 0] * 20}).to_csv(labelled, index=False)
    knobs = [f"--param={k}={v}" for k, v in SETTINGS.items()]
    code, _, err = run_cli("fit", "--model", model, "--method", "probe", "--input", labelled, "--output",
                           tmp_path / "fit", "--train-fraction", "0.5", *knobs)
    assert code == 0, err
    fit = ProbeFit.load(tmp_path / "fit")
    assert fit.spec["aux"]["n"] == 10 and fit.spec["split"]["source"] == str(labelled)
    code, _, err = run_cli("score", "--model", model, "--input", labelled, "--output", tmp_path / "s.csv", "--methods",
                           "probe", "--param", f"classifier={tmp_path / 'fit'}")
    assert code == 0, err
    scored = pd.read_csv(tmp_path / "s.csv")
    texts = pd.read_csv(labelled)["text"].tolist()
    expected = fit.score_texts(load_model(str(model)), texts)
    np.testing.assert_allclose(scored["probe"], expected, rtol=1e-5, atol=1e-5)
    code, _, err = run_cli("score", "--model", model, "--input", labelled, "--output", tmp_path / "t.csv", "--methods",
                           "probe", "--param", f"classifier={tmp_path / 'model'}")
    assert code == 2 and "Traceback" not in err and "error: " in err


def test_full_fine_tuning_changes_every_weight_of_a_copy_only(tok):
    """lora_r=0 is the authors' full fine-tune: every weight of the copy moves, the target's do not."""
    model = tiny_llama(len(tok), seed=0).requires_grad_(False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    proxy = proxy_model(model, tok, TEXTS[:4], lora_r=0, lr=1e-2, epochs=1, batch_size=4, max_tokens=512, pad_id=0,
                        seed=0)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not any(p.requires_grad for p in model.parameters())
    moved = [k for k, v in proxy.state_dict().items() if not torch.equal(before[k], v)]
    assert "model.layers.0.self_attn.q_proj.weight" in moved and "lm_head.weight" in moved
