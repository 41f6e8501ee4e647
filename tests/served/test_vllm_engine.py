"""The real vLLM engine, spoken to in raw HTTP (no product client): its prompt log-probs equal the in-process ones.

The prompt is the token ids our statistics pass feeds (`lm.fed_ids`: the boundary token first), so vLLM scores
the same tokens; float32 on both sides, so the true token's log-prob must agree within 1e-3 (measured: ≤ 1.7e-4).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from mia_core import datasets, load_model

from tests.support.vllm_server import post_json

pytestmark = [pytest.mark.integration, pytest.mark.served]
TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def wiki_texts() -> list[str]:
    """Three demo-wiki paragraphs, one per length bucket (32, 64, 128 words)."""
    data = datasets.load("demo-wiki").sort_values("id")
    return [data[data["bucket"] == b]["text"].iloc[i] for i, b in enumerate(sorted(data["bucket"].unique()))]


def served_logprobs(url: str, model: str, ids: list[int]) -> np.ndarray:
    """The true token's log-prob at every prompt position after the first, from POST /v1/completions."""
    status, answer = post_json(f"{url}/v1/completions", {"model": model, "prompt": ids, "max_tokens": 1,
                                                         "prompt_logprobs": 0, "temperature": 0})
    assert status == 200, answer
    positions = answer["choices"][0]["prompt_logprobs"]
    assert len(positions) == len(ids) and positions[0] is None
    return np.array([pos[str(token)]["logprob"] for pos, token in zip(positions[1:], ids[1:])])


@pytest.fixture(scope="module")
def in_process(wiki_texts) -> dict[str, tuple[list[list[int]], list[np.ndarray]]]:
    """Per built-in spec: the fed ids and the in-process true-token log-probs of each text (no stats cache)."""
    out = {}
    for spec in ("demo", "demo-known"):
        lm = load_model(spec, device="cpu")
        out[spec] = ([lm.fed_ids(t) for t in wiki_texts], [s.logprob for s in lm.token_stats(wiki_texts, cache=False)])
    return out


def gaps(url: str, served_name: str, reference: tuple[list[list[int]], list[np.ndarray]]) -> list[float]:
    """Largest |served − in-process| true-token log-prob of each text (requests one after another)."""
    out = []
    for ids, ours in zip(*reference):
        served = served_logprobs(url, served_name, ids)
        assert served.shape == ours.shape
        out.append(float(np.abs(served - ours).max()))
    return out


def test_demo_prompt_logprobs_equal_in_process(vllm_demo, in_process, record_property):
    measured = gaps(vllm_demo.url, "demo", in_process["demo"])
    record_property("max_gaps", measured)
    assert max(measured) < TOLERANCE, measured


def test_demo_prompt_logprobs_do_not_depend_on_batching(vllm_demo, in_process, record_property):
    """Each text scored alone and inside a concurrent batch agrees to 1e-4 (prefix caching is off)."""
    ids = in_process["demo"][0] * 2
    alone = [served_logprobs(vllm_demo.url, "demo", one) for one in ids[:3]]
    with ThreadPoolExecutor(len(ids)) as pool:
        batched = list(pool.map(lambda one: served_logprobs(vllm_demo.url, "demo", one), ids))
    measured = max(float(np.abs(a - b).max()) for a, b in zip(alone * 2, batched))
    record_property("max_gap", measured)
    assert measured < 1e-4


def test_demo_known_lora_module_equals_in_process(vllm_lora, in_process, record_property):
    """The LoRA module matches `load_model("demo-known")` (one request at a time: see `server_command`), and differs
    from the base model, so the adapter was applied (vLLM #16668 reports LoRA prompt log-probs wrong on GPU)."""
    measured = gaps(vllm_lora.url, "demo-known", in_process["demo-known"])
    record_property("max_gaps", measured)
    assert max(measured) < TOLERANCE, measured
    assert min(gaps(vllm_lora.url, "demo-known", in_process["demo"])) > 0.1


def test_merged_demo_known_served_equals_in_process(vllm_merged, in_process, record_property):
    measured = gaps(vllm_merged.url, "demo-known-merged", in_process["demo-known"])
    record_property("max_gaps", measured)
    assert max(measured) < TOLERANCE, measured


def test_merged_demo_known_folder_has_in_process_logits(demo_known_merged, wiki_texts):
    """The merged folder (peft merge_and_unload, saved and reloaded) is the model `load_model("demo-known")` is."""
    lm = load_model("demo-known", device="cpu")
    merged = AutoModelForCausalLM.from_pretrained(demo_known_merged, dtype=torch.float32)
    base = load_model("demo", device="cpu")
    ids = torch.tensor([lm.fed_ids(wiki_texts[0])])
    with torch.no_grad():
        ours, theirs, plain = (m(ids).logits for m in (lm.model, merged, base.model))  # (1, T, vocab)
    assert (ours - theirs).abs().max().item() < 1e-4
    assert (ours - plain).abs().max().item() > 0.1  # the adapter changed the model: the check can fail
