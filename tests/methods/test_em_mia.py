"""EM-MIA against a naive float64 re-computation from METHODS-FIELD.md §15 (a per-pair forward for every entry of the
ReCaLL matrix, the EM loop written out), the update rule by hand, order independence, the cap, the sample."""
from __future__ import annotations

import json
import random
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from mia_core import LanguageModel, get_method, load_model, score_texts
from mia_core.methods.em_mia import EmMiaParams, judged_texts
from mia_core.methods.em_mia.iteration import em_iterations
from mia_core.methods.em_mia.matrix import recall_matrix
from mia_core.model.stats_cache import StatsCache

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts, save_tiny_model, tiny_llama, train_causal_lm, word_tokenizer

TEXTS = random_texts(6, seed=41, min_words=3, max_words=14)


def boundary(lm) -> list[int]:
    return [lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")]


@torch.inference_mode()
def naive_mean_logprob(model, seq: list[int], first: int) -> float:
    """Mean of log p(seq[t] | seq[:t]) for t = first…len−1, from full float64 logits of one sequence."""
    logits = model.double()(torch.tensor([seq])).logits[0]
    model.float()
    logp = torch.log_softmax(logits, -1).numpy()
    return float(np.mean([logp[t - 1, seq[t]] for t in range(first, len(seq))]))


def naive_matrix(lm, texts) -> np.ndarray:
    """R[p, x] = LL(x | p) / LL(x), the sequence B + ids(p) + B + ids(x), one forward per pair."""
    b = boundary(lm)
    ids = [list(lm.tokenizer(t)["input_ids"]) for t in texts]
    ll = [naive_mean_logprob(lm.model, b + x, 1) for x in ids]
    return np.array([[naive_mean_logprob(lm.model, b + p + b + x, len(p) + 2) / ll[j] for j, x in enumerate(ids)]
                     for p in ids])


def naive_auc(scores, labels) -> float:
    """AUROC by counting pairs (ties half)."""
    pos, neg = scores[labels], scores[~labels]
    return float(np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg]))


def naive_em(r: np.ndarray, init: np.ndarray, iterations: int, keep_diagonal: bool) -> np.ndarray:
    """The spec's loop: y = [m > median m]; f(p) = AUC(R[p, ·], y) (diagonal out unless kept); m = −f."""
    m = init.copy()
    n = len(m)
    for _ in range(iterations):
        y = m > np.median(m)
        f = np.array([naive_auc(np.array([r[p, x] for x in range(n) if keep_diagonal or x != p]),
                                np.array([y[x] for x in range(n) if keep_diagonal or x != p])) for p in range(n)])
        m = np.where(np.isnan(f), 0.0, -f)
    return m


@pytest.mark.parametrize("mode", ["ours", "reference"])
def test_em_mia_matches_a_naive_float64_recomputation(llama_lm, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small-set warning
        df = score_texts(llama_lm, TEXTS, ["em_mia"], iterations=3, mode=mode)
    r = naive_matrix(llama_lm, TEXTS)
    init = np.array([s.logprob.mean(dtype=np.float64) for s in llama_lm.token_stats(TEXTS)])
    expected = naive_em(r, init, 3, keep_diagonal=mode == "reference")
    np.testing.assert_allclose(df["em_mia"].to_numpy(), expected, atol=1e-9)


def test_the_update_rule_by_hand():
    """N = 4, R by hand. m⁰ = (4, 3, 2, 1): y = (1, 1, 0, 0) (median 2.5). Diagonal out:
    f(0) on x = 1, 2, 3: R = (5, 1, 2), y = (1, 0, 0) → AUC 1 → m(0) = −1;
    f(1) on x = 0, 2, 3: R = (1, 2, 3), y = (1, 0, 0) → AUC 0 → m(1) = 0;
    f(2) on x = 0, 1, 3: R = (2, 2, 9), y = (1, 1, 0) → AUC 0 → m(2) = 0;
    f(3) on x = 0, 1, 2: R = (7, 1, 3), y = (1, 1, 0) → pairs (7>3, 1<3) → 0.5 → m(3) = −0.5."""
    r = np.array([[0, 5, 1, 2], [1, 0, 2, 3], [2, 2, 0, 9], [7, 1, 3, 0]], dtype=float)
    trace = em_iterations(r, np.arange(4), np.array([4.0, 3, 2, 1]), iterations=1, metric="auc_roc",
                          keep_diagonal=False)
    np.testing.assert_allclose(trace.prefix[0], [1, 0, 0, 0.5])
    np.testing.assert_allclose(trace.membership[0], [-1, 0, 0, -0.5])
    # kept diagonal, row 0: R = (0, 5, 1, 2), y = (1, 1, 0, 0): pairs 0<1, 0<2, 5>1, 5>2 → 0.5
    kept = em_iterations(r, np.arange(4), np.array([4.0, 3, 2, 1]), iterations=1, metric="auc_roc",
                         keep_diagonal=True)
    assert kept.prefix[0, 0] == pytest.approx(0.5)


def test_the_update_ranks_members_higher_when_non_members_are_the_better_prefixes():
    """EM-MIA's premise by hand, N = 6: members 0–2 are useless prefixes (constant rows: every AUC 0.5), non-members
    3–5 good ones (R = 2 after them for members, 1 for non-members). m⁰ = (1, 1, 0, 1, 0, 0), median 0.5, so
    y = (1, 1, 0, 1, 0, 0) has one error each way (init AUROC 6/9). Diagonal out:
    f(0…2) = 0.5; f(3) on x = 0, 1, 2, 4, 5: R = (2, 2, 2, 1, 1), y = (1, 1, 0, 0, 0) → (2.5 + 2.5)/6 = 5/6;
    f(4) on x = 0, 1, 2, 3, 5: R = (2, 2, 2, 1, 1), y = (1, 1, 0, 1, 0) → (1.5 + 1.5 + 0.5)/6 = 7/12; f(5) likewise.
    m¹ = −f puts every member (−0.5) above every non-member; round 2 then splits exactly: f = (½, ½, ½, 1, 1, 1).
    Pins both directions: a flipped AUC or a missing minus would rank the non-members first."""
    r = np.ones((6, 6))
    r[3:, :3] = 2.0
    trace = em_iterations(r, np.arange(6), np.array([1.0, 1, 0, 1, 0, 0]), iterations=2, metric="auc_roc",
                          keep_diagonal=False)
    np.testing.assert_allclose(trace.prefix[0], [0.5, 0.5, 0.5, 5 / 6, 7 / 12, 7 / 12])
    np.testing.assert_allclose(trace.membership[1], [-0.5, -0.5, -0.5, -1, -1, -1])


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """A tiny Llama trained on 40 members packed two to a sequence (B + a + B + b; 10 shufflings), 40 held out.

    Pretraining packs documents into one context, so a member is learnt after other members: a member prefix is
    familiar context and barely moves a member's likelihood, a non-member prefix is not, which is the ReCaLL gap
    EM-MIA looks for. The shared `membership` toy trains each text alone after B; there every prefix lowers the
    members alike (mean ReCaLL AUROC 0.855 after a member, 0.845 after a non-member) and EM-MIA finds nothing.
    """
    tok = word_tokenizer()
    texts = random_texts(80, seed=7)
    members, nonmembers = texts[:40], texts[40:]
    rng, train = random.Random(0), []
    for _ in range(10):
        order = rng.sample(members, len(members))
        train += [tok.eos_token.join(order[i:i + 2]) for i in range(0, len(order), 2)]
    model = train_causal_lm(tiny_llama(len(tok.get_vocab()), seed=1), tok, train, steps=200, lr=3e-3)
    lm = LanguageModel(model, tok, name="tiny-packed", stats_cache=StatsCache(tmp_path_factory.mktemp("packed")))
    return lm, members + nonmembers, np.r_[np.ones(40, dtype=bool), np.zeros(40, dtype=bool)]


def test_members_score_higher_when_members_were_trained_packed(packed):
    """Orientation, on a model where the premise holds (checked first): non-member prefixes separate the classes
    better than member prefixes, and EM-MIA from `loss` then ranks the members higher (AUROC by pair counting)."""
    lm, texts, members = packed
    ratios, _ = recall_matrix(lm, lm.token_stats(texts), np.arange(len(texts)))
    own = np.eye(len(texts), dtype=bool)
    as_prefix = np.array([naive_auc(ratios[p][~own[p]], members[~own[p]]) for p in range(len(texts))])
    assert as_prefix[~members].mean() > as_prefix[members].mean() + 0.05
    values = score_texts(lm, texts, ["em_mia"])["em_mia"].to_numpy()
    assert np.all(np.isfinite(values)) and values[members].mean() > values[~members].mean()
    assert naive_auc(values, members) > 0.9


def test_order_independence_and_details(llama_lm):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = score_texts(llama_lm, TEXTS, ["em_mia"], iterations=4)["em_mia"].to_numpy()
        order = [3, 0, 5, 1, 4, 2]
        moved = score_texts(llama_lm, [TEXTS[i] for i in order], ["em_mia"], iterations=4)["em_mia"].to_numpy()
    np.testing.assert_allclose(moved, first[order], atol=1e-12)


def test_constant_init_and_tiny_sets_are_refused():
    with pytest.raises(ValueError, match="all equal"):
        em_iterations(np.ones((3, 3)), np.arange(3), np.zeros(3), iterations=1, metric="auc_roc", keep_diagonal=False)
    spec = get_method("em_mia")
    with pytest.raises(ValueError, match="at least 2"):
        spec.prepare([object()], EmMiaParams(), lm=None)


def test_the_cap_names_itself_and_the_sample_option():
    texts = [f"text {i}" for i in range(7)]
    with pytest.raises(ValueError, match=r"7 texts needs 7² = 49 .*max_texts=6.*sample_size"):
        judged_texts(texts, EmMiaParams(max_texts=6))
    with pytest.raises(ValueError, match="sample_size must be"):
        EmMiaParams(max_texts=6, sample_size=7)
    assert judged_texts(texts, EmMiaParams(max_texts=7)).tolist() == list(range(7))


def test_the_sample_is_seeded_and_order_independent():
    texts = [f"text number {i}" for i in range(30)]
    picked = judged_texts(texts, EmMiaParams(sample_size=8, sample_seed=3))
    assert picked.size == 8 and len(set(picked.tolist())) == 8
    backwards = texts[::-1]
    again = judged_texts(backwards, EmMiaParams(sample_size=8, sample_seed=3))
    assert sorted(backwards[i] for i in again) == sorted(texts[i] for i in picked)
    other = judged_texts(texts, EmMiaParams(sample_size=8, sample_seed=4))
    assert set(other.tolist()) != set(picked.tolist())


def test_the_sampled_option_matches_the_naive_loop_on_the_judged_columns(llama_lm):
    """Each prefix judged only on the sampled texts (its own column left out); details record which and how many."""
    params = dict(iterations=2, sample_size=3, sample_seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats = llama_lm.token_stats(TEXTS)
        contexts = get_method("em_mia").prepare(stats, EmMiaParams(**params), lm=llama_lm)
    judged = judged_texts(TEXTS, EmMiaParams(**params))
    r = naive_matrix(llama_lm, TEXTS)[:, judged]
    m = np.array([s.logprob.mean(dtype=np.float64) for s in stats])
    for _ in range(2):
        y = m[judged] > np.median(m[judged])
        f = np.array([naive_auc(r[p][judged != p], y[judged != p]) for p in range(len(TEXTS))])
        m = np.where(np.isnan(f), 0.0, -f)
    np.testing.assert_allclose([c["membership_scores"][-1] for c in contexts], m, atol=1e-9)
    assert contexts[0]["judged_count"] == 3 and contexts[0]["conditional_passes"] == 18
    assert contexts[0]["sample_seed"] == 1 and len(contexts[0]["judged"]) == 3


def test_small_sets_warn(llama_lm):
    with pytest.warns(UserWarning, match="median split is noisy"):
        score_texts(llama_lm, TEXTS[:3], ["em_mia"], iterations=1)


def test_cli_scores_as_python_and_refuses_over_the_cap(tmp_path, monkeypatch):
    """`mia score --methods em_mia --param …` gives the Python API's scores; over the cap: one `error:` line, exit 2."""
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    model_dir = save_tiny_model(tmp_path / "model")
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps({"text": t}) for t in TEXTS))
    code, _, err = run_cli("score", "--model", model_dir, "--input", src, "--output", tmp_path / "s.csv",
                           "--methods", "em_mia", "--param", "iterations=2", "--param", "sample_size=4")
    assert code == 0, err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = score_texts(load_model(str(model_dir)), TEXTS, ["em_mia"], iterations=2, sample_size=4)
    np.testing.assert_allclose(pd.read_csv(tmp_path / "s.csv")["em_mia"], expected["em_mia"], atol=1e-9)
    code, _, err = run_cli("score", "--model", model_dir, "--input", src, "--output", tmp_path / "t.csv",
                           "--methods", "em_mia", "--param", "max_texts=5")
    assert code == 2 and "error:" in err and "max_texts=5" in err and "sample_size" in err and "Traceback" not in err
