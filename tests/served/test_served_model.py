"""A model served by a real vLLM engine, scored through `mia_core`'s served path, against the same model loaded in
process: the same statistics (ids, windows, offsets, log-probs to 1e-3), the same scores and AUROC, the methods the
server's answers cannot support refused with the reason, and failures as one `error:` line."""
from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import mia_core
from mia_core import load_model
from mia_core.model.demo_weights import demo_folder
from mia_core.model.served.check import check_served, determinism_gap
from mia_core.model.served.probe import PROBE_TEXT
from mia_core.model.stats_cache import StatsCache
from tests.support.cli_runner import run_cli

pytestmark = [pytest.mark.integration]

#: Methods that read only the true tokens' log-probs and need no other input: what a served model scores.
LOGPROB_METHODS = ["loss", "min_k", "zlib"]
LONG_TEXT = " ".join(f"In {1800 + n} the harbour of the town received {n * 13} ships, most of them from the north."
                     for n in range(12))


@pytest.fixture(scope="module")
def demo_local():
    return load_model("demo")


def _served(server, settings: str = "model=demo", **kwargs):
    return load_model(f"{server.url}/v1?{settings}", **kwargs)


def _io(folder) -> list[str]:
    """--input (one short text) and --output for `mia score`."""
    (folder / "text.txt").write_text("Some text to score.")
    return ["--input", str(folder / "text.txt"), "--output", str(folder / "scores.csv")]


def _short_wiki(n_per_label: int) -> tuple[list[str], np.ndarray]:
    data = mia_core.datasets.load("demo-wiki")
    rows = data[data["bucket"] == data["bucket"].min()]
    rows = rows.groupby("label", group_keys=False).head(n_per_label)
    return rows["text"].tolist(), rows["label"].to_numpy()


def test_served_statistics_equal_the_in_process_ones(vllm_demo, demo_local):
    texts, _ = _short_wiki(6)
    served = _served(vllm_demo)
    assert served.access.full_distribution is False and served.warnings == []
    for ours, theirs in zip(demo_local.token_stats(texts, cache=False), served.token_stats(texts, cache=False)):
        np.testing.assert_array_equal(theirs.token_ids, ours.token_ids)
        np.testing.assert_array_equal(theirs.offsets, ours.offsets)  # heatmaps keep their character offsets
        np.testing.assert_allclose(theirs.logprob, ours.logprob, atol=1e-3)
        assert (theirs.top1_id == ours.top1_id).mean() >= 0.98  # near-ties may swap between float kernels
        assert (theirs.rank == ours.rank).mean() >= 0.95
        assert np.isnan(theirs.mu).all()  # not asked of the server: absent, never approximated


def test_long_texts_are_windowed_as_in_process(vllm_demo):
    local = load_model("demo", max_length=48)
    served = _served(vllm_demo, max_length=48)
    ours, theirs = local.token_stats([LONG_TEXT], cache=False)[0], served.token_stats([LONG_TEXT], cache=False)[0]
    assert ours.long_text == theirs.long_text == "sliding" and ours.n_scored == theirs.n_scored > 48
    np.testing.assert_allclose(theirs.logprob, ours.logprob, atol=1e-3)


def test_scores_and_auroc_equal_in_process_on_demo_wiki(vllm_merged):
    texts, labels = _short_wiki(40)
    local = load_model("demo-known")
    served = load_model(f"{vllm_merged.url}/v1?model=demo-known-merged&tokenizer=demo")
    ours = mia_core.score_texts(local, texts, LOGPROB_METHODS)
    theirs = mia_core.score_texts(served, texts, LOGPROB_METHODS)
    for method in LOGPROB_METHODS:
        np.testing.assert_allclose(theirs[method], ours[method], atol=1e-3)
        assert abs(roc_auc_score(labels, theirs[method]) - roc_auc_score(labels, ours[method])) <= 0.005
    assert roc_auc_score(labels, theirs["loss"]) > 0.6  # the merged adapter's members do score higher


def test_full_distribution_mode_gives_min_k_pp(vllm_demo, demo_local, tmp_path):
    texts = ["The river flooded the town.", "A cat sat on the mat today."]
    served = _served(vllm_demo, "model=demo&logprobs=full&concurrency=2")
    assert "min_k_pp" in mia_core.methods_allowed(served).allowed
    # full-vocabulary log-probs over HTTP are the slow part (seconds a token on CPU vLLM): fetched once, into an
    # empty cache of this test's own, which score_texts then reads (the served statistics, not another model's)
    served.stats_cache = StatsCache(tmp_path / "served-stats")
    fetched = served.token_stats(texts)
    assert served.stats_cache.usage().entries == len(texts)
    for ours, theirs in zip(demo_local.token_stats(texts, cache=False), fetched):
        np.testing.assert_allclose(theirs.mu, ours.mu, atol=1e-3)
        np.testing.assert_allclose(theirs.sigma, ours.sigma, atol=1e-3)
        np.testing.assert_array_equal(theirs.rank, ours.rank)
    ours = mia_core.score_texts(demo_local, texts, ["min_k_pp"])
    theirs = mia_core.score_texts(served, texts, ["min_k_pp"])
    np.testing.assert_allclose(theirs["min_k_pp"], ours["min_k_pp"], atol=1e-3)
    # the identity probe (every connection) asks for the true tokens' log-probs only, even with logprobs=full
    asked = []
    post = served.client.post
    served.client.post = lambda path, body: asked.append(body.get("prompt_logprobs")) or post(path, body)
    probe = served.probe_logprobs()
    assert asked == [1]
    np.testing.assert_allclose(probe, demo_local.token_stats([PROBE_TEXT], cache=False)[0].logprob, atol=1e-3)
    # so does `mia models check`'s repeatability probe (10 requests): the same forward pass's true-token log-probs
    asked.clear()
    assert determinism_gap(served) <= 1e-4 and asked == [1] * 10
    light = served.true_token_stats(served.fed_ids(texts[0]), 1)["logprob"]
    np.testing.assert_allclose(light, fetched[0].logprob, atol=1e-4)


def test_methods_the_server_cannot_support_are_refused_with_the_reason(vllm_demo, tmp_path):
    served = _served(vllm_demo)
    refused = mia_core.methods_allowed(served).refused
    assert set(refused) >= {"min_k_pp", "grad_norm", "recall"} and not {"loss", "samia"} & set(refused)
    assert "full next-token distribution" in refused["min_k_pp"] and "logprobs=full" in refused["min_k_pp"]
    with pytest.raises(ValueError, match="Min-K%\\+\\+ needs"):
        mia_core.score_texts(served, ["Some text to score."], ["loss", "min_k_pp"])
    code, _, err = run_cli("score", "--model", f"{vllm_demo.url}/v1?model=demo", "--methods", "min_k_pp", *_io(tmp_path))
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: Min-K%++ needs")


def kv_cache_requests(model_folder, window: int) -> int:
    """Requests of `window` tokens the fixture's KV cache holds at once, from its settings: VLLM_CPU_KVCACHE_SPACE=1
    (GiB) of float32 keys and values (2 × layers × KV heads × head size × 4 bytes per token) in blocks of 128 tokens
    (vLLM's CPU default), clamped to 1…64."""
    config = json.loads((model_folder / "config.json").read_text())
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    per_token = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head * 4
    blocks = (1 << 30) // (per_token * 128)
    return max(1, min(64, blocks * 128 // window))


def test_models_check_reports_the_server_and_its_methods(vllm_demo):
    code, out, err = run_cli("models", "check", f"{vllm_demo.url}/v1?model=demo")
    assert code == 0, err
    assert "vLLM 0.32.0" in out and "the same ids as the server's /tokenize" in out
    assert "all (the whole next-token distribution" in out  # the fixture serves --max-logprobs -1
    assert "repeatable" in out and "yes (" in out  # --no-enable-prefix-caching: the probe agrees to 1e-4
    assert "min_k_pp" in out and "refused" in out
    expected = kv_cache_requests(demo_folder(), 2047)  # windows of max_model_len − 1 tokens
    assert expected == 11  # 182 blocks of 128 tokens: 23,296 tokens ÷ 2,047
    assert f"{expected} requests at once (sized from the server's KV cache: 182 blocks × 128 tokens" in out
    allows = next(line for line in out.splitlines() if line.startswith("demo allows"))
    assert "samia" in allows.split(": ", 1)[1].split(", ")  # the server samples: SaMIA is allowed


@pytest.mark.parametrize("settings, message", [
    ("model=nope", "serves no model 'nope'; it serves: demo"),
    ("model=demo&tokenizer=/no/such/folder", "could not load the tokenizer"),
])
def test_bad_served_specs_are_one_error_line(vllm_demo, settings, message, tmp_path):
    code, _, err = run_cli("score", "--model", f"{vllm_demo.url}/v1?{settings}", "--methods", "loss", *_io(tmp_path))
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last and "Traceback" not in err


def test_check_served_records_repeatability_for_later_runs(vllm_demo):
    served = _served(vllm_demo)
    report = check_served(served)
    gap = float(dict(report.facts)["repeatable"].split(": ")[-1].rstrip(")"))
    assert gap <= 1e-4 and report.warnings == []
    assert _served(vllm_demo).fingerprint == served.fingerprint  # the same model behind the URL: the same identity


def test_a_lora_adapter_is_scored_with_its_warning(vllm_lora):
    served = load_model(f"{vllm_lora.url}/v1?model=demo-known&concurrency=1")  # the base's tokenizer, by default
    assert any("LoRA adapter served by vLLM on 'demo'" in w and "#16668" in w for w in served.warnings)
    texts, _ = _short_wiki(3)
    local = load_model("demo-known")
    for ours, theirs in zip(local.token_stats(texts, cache=False), served.token_stats(texts, cache=False)):
        np.testing.assert_allclose(theirs.logprob, ours.logprob, atol=1e-3)
    code, _, err = run_cli("models", "check", f"{vllm_lora.url}/v1?model=demo-known&concurrency=1")
    assert code == 0 and "warning: 'demo-known' is a LoRA adapter" in err


def test_a_full_run_says_before_it_starts_how_much_the_server_sends(vllm_demo, tmp_path):
    """The bytes a server answers per position, measured on the real engine, are what `answer_bytes_per_token` says
    (within 2×) for logprobs=full and for the true token's log-prob; `mia score` announces a full run's megabytes
    before it starts, and the progress starts at 0 before the first answer."""
    full, top = _served(vllm_demo, "model=demo&logprobs=full&concurrency=1"), _served(vllm_demo, "model=demo")
    ids = full.fed_ids("The river flooded the town last spring.")
    for lm, k in ((full, -1), (top, 1)):
        body = json.dumps({"model": "demo", "prompt": [int(i) for i in ids], "max_tokens": 1, "temperature": 0.0,
                           "prompt_logprobs": k}).encode()
        request = urllib.request.Request(f"{vllm_demo.url}/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as answer:
            per_position = len(answer.read()) / (len(ids) - 1)
        assert 0.5 <= per_position / lm.answer_bytes_per_token <= 2, (k, per_position, lm.answer_bytes_per_token)
    seen = []
    top.token_stats(["A short text to score."], cache=False, progress=lambda done, total: seen.append((done, total)))
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] > 0
    texts = tmp_path / "t.csv"
    texts.write_text("text\nThe river flooded the town last spring.\n")
    code, _, err = run_cli("score", "--model", f"{vllm_demo.url}/v1?model=demo&logprobs=full", "--input", texts,
                           "--output", tmp_path / "s.csv", "--methods", "min_k_pp")
    assert code == 0, err
    note = next(line for line in err.splitlines() if line.startswith("note: the server sends the whole distribution"))
    assert f"about {full.answer_bytes_per_token / 1e6:.1f} MB per token" in note
