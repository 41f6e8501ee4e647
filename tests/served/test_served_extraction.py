"""Extraction windows over a real vLLM engine (each window one request with the top-k prompt log-probs) against the
same windows computed in process from the demo's logits, and a window recomputed by hand from the raw answer."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import requests

import mia_core
from mia_core.extract import ExtractionSettings, extract_texts
from mia_core.model.loading import load_model
from mia_core.model.served.http import ServedError
from mia_core.model.served.served_model import ServedModel

from tests.support.cli_runner import run_cli

pytestmark = [pytest.mark.integration]

SETTINGS = ExtractionSettings(prefix=8, suffix=4, stride=4, top_k=3, temperature=1.3)


def paragraph() -> str:
    data = mia_core.datasets.load("demo-wiki")
    return data[data["label"] == 1]["text"].iloc[0]


def test_served_windows_equal_the_in_process_ones(vllm_demo):
    text = paragraph()
    ours = extract_texts(load_model("demo"), [text], SETTINGS, cache=False)[0].windows
    served = load_model(f"{vllm_demo.url}/v1?model=demo")
    theirs = extract_texts(served, [text], SETTINGS, cache=False)[0].windows
    assert len(theirs) == len(ours) > 10 and list(theirs["token_start"]) == list(ours["token_start"])
    finite = np.isfinite(ours["log10_pz"].to_numpy())
    assert finite.any() and (~finite).any()  # windows of both kinds: some suffix token outside the top 3
    np.testing.assert_array_equal(np.isfinite(theirs["log10_pz"].to_numpy()), finite)
    np.testing.assert_allclose(theirs["log10_pz"].to_numpy()[finite], ours["log10_pz"].to_numpy()[finite], atol=5e-3)
    assert theirs["greedy"].tolist() == ours["greedy"].tolist()


def test_a_window_by_hand_from_the_raw_answer(vllm_demo):
    """log q under top-k at T from the raw `prompt_logprobs` of one window, summed in the test."""
    served = load_model(f"{vllm_demo.url}/v1?model=demo")
    text = paragraph()
    got = extract_texts(served, [text], SETTINGS, cache=False)[0].windows.iloc[1]
    assert got["token_start"] == SETTINGS.stride  # the second window: the boundary token, then its own tokens
    whole = served.fed_ids(text)
    fed = [whole[0]] + whole[1 + SETTINGS.stride : 1 + SETTINGS.stride + SETTINGS.window]
    answer = requests.post(f"{vllm_demo.url}/v1/completions", json={
        "model": "demo", "prompt": fed, "max_tokens": 1, "prompt_logprobs": SETTINGS.top_k}, timeout=60).json()
    rows = answer["choices"][0]["prompt_logprobs"]
    total = 0.0
    for j in range(1 + SETTINGS.prefix, len(fed)):
        entries = {int(k): v for k, v in rows[j].items()}
        true = entries[fed[j]]
        if true["rank"] > SETTINGS.top_k:
            total = -math.inf
            break
        top = [v["logprob"] / SETTINGS.temperature for v in entries.values() if v["rank"] <= SETTINGS.top_k]
        total += true["logprob"] / SETTINGS.temperature - math.log(sum(math.exp(t) for t in top))
    want = total / math.log(10)
    assert got["log10_pz"] == want or got["log10_pz"] == pytest.approx(want, abs=1e-9)


def test_other_servers_and_the_cli(vllm_demo, tmp_path):
    sglang = SimpleNamespace(served=SimpleNamespace(api="sglang"))  # a served model of another shape
    with pytest.raises(ServedError, match="api=sglang: extraction over a served model reads vLLM's top-k"):
        ServedModel.extraction_windows(sglang, np.zeros((1, 3), np.int64), prefix=1, suffix=1, top_k=1,
                                       temperature=1.0, n_lead=1)
    (tmp_path / "t.txt").write_text(paragraph())
    code, _, err = run_cli("extract", "--model", f"{vllm_demo.url}/v1?model=demo", "--input", tmp_path / "t.txt",
                           "--output", tmp_path / "w.csv", "--prefix", "8", "--suffix", "4", "--stride", "4",
                           "--top-k", "3", "--temperature", "1.3")
    assert code == 0, err
    cli = pd.read_csv(tmp_path / "w.csv")
    api = extract_texts(load_model(f"{vllm_demo.url}/v1?model=demo"), [paragraph()], SETTINGS, cache=False)[0].windows
    np.testing.assert_allclose(cli["log10_pz"].to_numpy(), api["log10_pz"].to_numpy(), rtol=0, atol=1e-9)
