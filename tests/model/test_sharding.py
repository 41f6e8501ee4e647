"""A model sharded by `max_memory` (accelerate's dispatch: here part on the CPU, part offloaded to disk) gives the
same statistics as the same weights loaded whole, under the same fingerprint; bad caps are one clear error."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from mia_core import ModelLoadError, load_model
from mia_core.model.memory_map import parse_max_memory
from mia_core.model.sharding import capped_device

from tests.support.cli_runner import run_cli
from tests.support.oracle import naive_stats
from tests.support.tiny import random_texts, tiny_tokenizer

FLOATS = ("logprob", "mu", "sigma", "top1_logprob", "entropy")
INTS = ("rank", "top1_id", "token_ids")


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A 6-layer Llama (layers, not the embedding and head, hold most weights: a cap then splits between layers)."""
    tok = tiny_tokenizer(300)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    folder = tmp_path_factory.mktemp("six-layers")
    LlamaForCausalLM(config).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def weight_bytes(lm) -> int:
    """Bytes of the whole model's float32 weights, counted on the model loaded whole."""
    return sum(p.numel() * p.element_size() for p in lm.model.parameters())


def texts() -> list[str]:
    """Short texts, and one longer than the 64-token context (scored in sliding windows)."""
    return random_texts(5, seed=7) + [" ".join(random_texts(8, seed=8))]


def test_cpu_and_disk_shards_give_the_statistics_of_the_whole_model(model_dir):
    whole = load_model(str(model_dir), device="cpu")  # a cap of host memory alone computes on the CPU, in float32
    half = weight_bytes(whole) // 2
    sharded = load_model(str(model_dir), max_memory=f"cpu={half}B")
    placed = sharded.model.hf_device_map
    assert set(placed.values()) == {"cpu", "disk"}, placed  # really split: some layers computed, the rest on disk
    assert placed["model.embed_tokens"] == "cpu" and placed["lm_head"] == "disk"
    assert sharded.model.lm_head.weight.device.type == "meta"  # offloaded: loaded only while it runs
    assert sharded.fingerprint == whole.fingerprint and sharded.dtype == whole.dtype  # same cache keys
    assert sharded.device == torch.device("cpu")

    a, b = whole.token_stats(texts(), cache=False), sharded.token_stats(texts(), cache=False)
    assert [s.long_text for s in b][-1] == "sliding"
    for x, y in zip(a, b):
        for key in FLOATS:
            np.testing.assert_allclose(getattr(y, key), getattr(x, key), atol=1e-6, rtol=0, err_msg=key)
        for key in INTS:
            np.testing.assert_array_equal(getattr(y, key), getattr(x, key), err_msg=key)
    assert sharded.model.lm_head.weight.device.type == "meta"  # the head went back to disk after each batch

    # and against a naive float64 computation on the whole model (an oracle independent of both paths)
    ids = sharded.fed_ids(texts()[0])
    expected = naive_stats(whole.model, ids)
    for key in ("logprob", "mu", "sigma", "top1_logprob"):
        np.testing.assert_allclose(getattr(b[0], key), expected[key], atol=1e-4, rtol=0, err_msg=key)
    np.testing.assert_array_equal(b[0].rank, expected["rank"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")
def test_gpu_and_cpu_shards_give_the_statistics_of_the_whole_model_on_the_gpu(model_dir):
    """A cap that leaves part of the model in host memory: layers on cuda:0, the rest on the CPU (accelerate moves
    them to the GPU while they run). The statistics equal the model loaded whole on the GPU, float32."""
    whole = load_model(str(model_dir), device="cuda", dtype="float32")
    half = weight_bytes(whole) // 2
    sharded = load_model(str(model_dir), dtype="float32", max_memory=f"cuda:0={half}B,cpu=1GiB")
    placed = sharded.model.hf_device_map
    assert set(placed.values()) == {0, "cpu"}, placed  # really split between the GPU and host memory
    assert placed["model.embed_tokens"] == 0 and sharded.device == torch.device("cuda", 0)
    assert sharded.fingerprint == whole.fingerprint
    a, b = whole.token_stats(texts(), cache=False), sharded.token_stats(texts(), cache=False)
    for x, y in zip(a, b):
        for key in FLOATS:
            np.testing.assert_allclose(getattr(y, key), getattr(x, key), atol=1e-5, rtol=0, err_msg=key)
        for key in INTS:
            np.testing.assert_array_equal(getattr(y, key), getattr(x, key), err_msg=key)
    expected = naive_stats(whole.model.cpu().double(), sharded.fed_ids(texts()[0]))  # float64 oracle on the host
    for key in ("logprob", "mu", "sigma", "top1_logprob"):
        np.testing.assert_allclose(getattr(b[0], key), expected[key], atol=1e-4, rtol=0, err_msg=key)
    np.testing.assert_array_equal(b[0].rank, expected["rank"])


def test_memory_caps_are_read_as_accelerate_takes_them():
    assert parse_max_memory("cuda:0=20GiB, 1=1.5GB,cpu=512MiB,disk=1TB") == {
        0: 20 * 2**30, 1: 1_500_000_000, "cpu": 512 * 2**20, "disk": 10**12}
    assert parse_max_memory({"cuda:1": "2KiB", "cpu": 1000}) == {1: 2048, "cpu": 1000}
    assert parse_max_memory(None) is None
    # where a capped model computes (its dtype follows): the first GPU named, else the host
    assert capped_device("cpu=1GiB,disk=1TB") == torch.device("cpu")
    assert capped_device("cpu=1GiB,cuda:1=2GiB,0=3GiB") == torch.device("cuda", 0)
    for bad, why in (("", "names no device"), ("cpu", "has no '='"), ("gpu=1GB", "unknown device 'gpu'"),
                     ("cpu=1GB,cpu=2GB", "named twice"), ("cpu=0", "must be positive"),
                     ("cpu=lots", "not a number with a unit")):
        with pytest.raises(ValueError, match=why):
            parse_max_memory(bad)


@pytest.mark.parametrize("args, message", [
    (["--max-memory", "cpu=lots"], "error: --max-memory (max_memory): cpu=lots: the size is not a number with a unit"),
    (["--max-memory", "cuda:3=1GiB,cpu=1GiB"], "error: --max-memory (max_memory) names cuda:3, but this host's CUDA"),
    (["--max-memory", "cpu=1GiB", "--device", "cpu"], "error: --max-memory (max_memory) places the model itself"),
    (["--max-memory", "disk=1GiB"], "error: --max-memory (max_memory) names only disk"),
])
def test_a_bad_cap_is_one_error_line(model_dir, tmp_path, args, message):
    if torch.cuda.device_count() > 3 and "cuda:3" in args[1]:
        pytest.skip("this host has a cuda:3")
    (tmp_path / "t.txt").write_text("One text to score.")
    code, _, err = run_cli("score", "--model", model_dir, "--input", tmp_path / "t.txt", "--output",
                           tmp_path / "s.csv", *args)
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith(message), err
    assert not (tmp_path / "s.csv").exists()


def test_the_command_line_scores_a_sharded_model_as_a_whole_one(model_dir, tmp_path, monkeypatch):
    data = tmp_path / "texts.csv"
    pd.DataFrame({"text": texts()}).to_csv(data, index=False)
    whole = load_model(str(model_dir), device="cpu")
    cap = f"cpu={weight_bytes(whole) // 2}B,disk=1GiB"
    common = ["score", "--model", model_dir, "--input", data, "--methods", "loss,min_k,min_k_pp"]
    assert run_cli(*common, "--output", tmp_path / "whole.csv", "--device", "cpu")[0] == 0
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "other-cache"))  # computed by the shards, not read back
    code, _, err = run_cli(*common, "--output", tmp_path / "sharded.csv", "--max-memory", cap)
    assert code == 0, err
    first, second = pd.read_csv(tmp_path / "whole.csv"), pd.read_csv(tmp_path / "sharded.csv")
    np.testing.assert_allclose(second[["loss", "min_k", "min_k_pp"]], first[["loss", "min_k", "min_k_pp"]],
                               atol=1e-6, rtol=0)


def test_demo_known_is_refused_before_anything_loads():
    with pytest.raises(ModelLoadError, match="demo-known merges its adapter into weights in memory"):
        load_model("demo-known", max_memory="cpu=1GiB")
