"""The demo model's statistics and scores against a float64 recomputation from the same logits (docs/methods.md,
"Precision"): log p, μ, σ within 1e-5 · max(1, |x|), ids, top-1 and ranks exact, scores within 1e-5 relative."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import mia_core
from mia_core import METHODS
from mia_core.inputs import datasets

SEED_METHODS = ["loss", "zlib", "min_k", "min_k_pp", "dc_pdd"]


def float64_stats(lm, text: str) -> dict[str, np.ndarray]:
    """Statistics of a text recomputed naively in float64 from the model's own logits (the E[x²] − E[x]² variance)."""
    ids = torch.tensor([lm.fed_ids(text)])
    with torch.inference_mode():
        logits = lm.model(input_ids=ids).logits[0, :-1].double()  # (n, V): position t predicts token t + 1
    logp = torch.log_softmax(logits, -1)
    p = logp.exp()
    target = ids[0, 1:]
    true = logp[torch.arange(len(target)), target]
    mu = (p * logp).sum(-1)
    return {"token_ids": target.numpy(), "logprob": true.numpy(), "mu": mu.numpy(),
            "sigma": ((p * logp**2).sum(-1) - mu**2).clamp_min(0).sqrt().numpy(),
            "top1_id": logp.argmax(-1).numpy(), "rank": (1 + (logp > true[:, None]).sum(-1)).numpy()}


@pytest.mark.integration
def test_demo_statistics_and_scores_are_within_float32_rounding_of_a_float64_recomputation():
    lm = mia_core.load_model("demo", device="cpu")
    frame = datasets.load("demo-wiki")
    texts = frame.groupby("label").head(3)["text"].tolist()  # 3 members, 3 non-members
    # each text alone (batch_tokens=1), so the float64 recomputation starts from the very logits our reduction saw
    stats = lm.token_stats(texts, cache=False, batch_tokens=1)
    freq = mia_core.build_frequency_table(lm.tokenizer, frame["text"].tolist(), vocab_size=lm.vocab_width)
    for text, st in zip(texts, stats):
        exact = float64_stats(lm, text)
        for name in ("token_ids", "top1_id", "rank"):
            np.testing.assert_array_equal(getattr(st, name), exact[name], err_msg=name)
        for name in ("logprob", "mu", "sigma"):
            ours = getattr(st, name).astype(np.float64)
            assert np.all(np.abs(ours - exact[name]) <= 1e-5 * np.maximum(1.0, np.abs(exact[name]))), name
        recomputed = dataclasses.replace(st, logprob=exact["logprob"], mu=exact["mu"], sigma=exact["sigma"])
        for method in SEED_METHODS:
            inputs = {"freq": freq} if method == "dc_pdd" else {}
            ours = mia_core.score(method, st, **inputs).value
            want = METHODS[method].fn(recomputed, METHODS[method].make_params(), **inputs).value
            assert ours == pytest.approx(want, rel=1e-5), method
    batched = mia_core.score_texts(lm, texts, SEED_METHODS, freq=freq, stats=stats)  # batch forms, as pages score
    for method in SEED_METHODS:
        singles = [mia_core.score(method, st, **({"freq": freq} if method == "dc_pdd" else {})).value for st in stats]
        np.testing.assert_allclose(batched[method].to_numpy(), singles, rtol=1e-12, atol=0, err_msg=method)
