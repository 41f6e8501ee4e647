"""Generation through a real vLLM engine: a sample's continuation depends on nothing but (seed, text, j) — the same
ids twice, in reverse order and at concurrency 1 vs 8, and the ids the engine returns for that seed when asked in raw
HTTP — and SaMIA over the served model equals SaMIA recomputed here from raw requests, in Python and on the CLI."""
from __future__ import annotations

import hashlib
import math
from collections import Counter

import pandas as pd
import pytest

import mia_core
from mia_core.model.loading import load_model
from mia_core.model.sampling import Sampling, sample_continuations
from tests.served.test_served_model import _short_wiki
from tests.support.cli_runner import run_cli
from tests.support.vllm_server import post_json

pytestmark = [pytest.mark.integration]

SAMIA = {"n_samples": 2, "max_length": 40, "seed": 3}  # short continuations: the engine runs on 2 shared CPU cores
BUDGET = 10  # tokens per sample in the determinism test


def seed_of(seed: int, text: str, j: int) -> int:
    """Sample j's seed, written out as docs/methods.md ("samia", Sampling) says: sha256 of (seed, sha256(text), j)."""
    digest = hashlib.sha256(f"{seed}|{hashlib.sha256(text.encode('utf-8')).hexdigest()}|{j}".encode()).hexdigest()
    return int(digest[:16], 16) >> 1


def raw_sample(url: str, prompt: list[int], budget: int, seed: int, top_k: int = 50) -> list[int]:
    """One continuation asked of the engine directly (no product client)."""
    status, answer = post_json(f"{url}/v1/completions", {
        "model": "demo", "prompt": prompt, "max_tokens": budget, "temperature": 1.0, "top_k": top_k, "top_p": 1.0,
        "n": 1, "seed": seed, "return_token_ids": True})
    assert status == 200, answer
    return answer["choices"][0]["token_ids"]


@pytest.fixture(scope="module")
def prompts(vllm_demo) -> dict[str, list[int]]:
    served = load_model(f"{vllm_demo.url}/v1?model=demo&concurrency=1")
    texts, _ = _short_wiki(2)
    return {t: served.fed_ids(" ".join(t.split()[:8])) for t in texts}


def test_a_sample_depends_only_on_its_seed_text_and_index(vllm_demo, prompts):
    one = load_model(f"{vllm_demo.url}/v1?model=demo&concurrency=1")
    eight = load_model(f"{vllm_demo.url}/v1?model=demo&concurrency=8")
    assert one.access.generation and "samia" in mia_core.methods_allowed(one).allowed
    sampling = Sampling(n=2, seed=7, temperature=1.0, top_k=50, top_p=1.0)
    budgets = {t: BUDGET for t in prompts}
    first = sample_continuations(one, prompts, budgets, sampling)
    backwards = dict(reversed(list(prompts.items())))
    assert sample_continuations(one, backwards, budgets, sampling) == first  # twice, the second in reverse order
    assert sample_continuations(eight, backwards, budgets, sampling) == first  # every request at once
    text = next(iter(prompts))
    assert first[text][1] == raw_sample(vllm_demo.url, prompts[text], BUDGET, seed_of(7, text, 1))  # the engine's own
    rows = [tuple(row) for rows in first.values() for row in rows]
    assert len(set(rows)) == len(rows) and all(0 < len(r) <= BUDGET for r in rows)  # each seed its own sample


def expected_samia(url: str, served, texts: list[str]) -> list[float]:
    """SaMIA recomputed as docs/methods.md says, from raw requests: prompt = the first floor(|W|/2) words, d =
    round(|W|/2) words dropped from each decoded output, ROUGE-1 recall against W[d:], the mean over samples."""
    values = []
    for text in texts:
        words = text.split()
        prompt = served.fed_ids(" ".join(words[:math.floor(len(words) / 2)]))
        reference = Counter(words[round(len(words) / 2):])
        recalls = []
        for j in range(SAMIA["n_samples"]):
            ids = raw_sample(url, prompt, SAMIA["max_length"] - len(prompt), seed_of(SAMIA["seed"], text, j))
            candidate = Counter(served.tokenizer.decode(prompt + ids, skip_special_tokens=True).split()
                                [round(len(words) / 2):])
            recalls.append(sum(min(c, candidate[w]) for w, c in reference.items()) / sum(reference.values()))
        values.append(sum(recalls) / len(recalls))
    return values


def test_samia_over_a_served_model_equals_a_recomputation_in_python_and_on_the_cli(vllm_demo, tmp_path):
    texts, _ = _short_wiki(1)
    served = load_model(f"{vllm_demo.url}/v1?model=demo")
    expected = expected_samia(vllm_demo.url, served, texts)
    assert max(expected) > 0  # some words recovered: the comparison can fail
    ours = mia_core.score_texts(served, texts, ["samia"], **SAMIA)["samia"].tolist()
    assert ours == pytest.approx(expected, rel=1e-12)
    pd.DataFrame({"text": texts}).to_csv(tmp_path / "texts.csv", index=False)
    code, _, err = run_cli("score", "--model", f"{vllm_demo.url}/v1?model=demo", "--methods", "samia",
                           *(f"--param={k}={v}" for k, v in SAMIA.items()), "--input", tmp_path / "texts.csv",
                           "--output", tmp_path / "scores.csv")
    assert code == 0, err
    assert pd.read_csv(tmp_path / "scores.csv")["samia"].tolist() == pytest.approx(expected, rel=1e-12)
