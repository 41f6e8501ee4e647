"""Model loading: safety defaults, clear offline errors, and the embedded demo model (integration)."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

from mia_core import METHODS, ModelLoadError, load_model, score_texts

from tests.support.cli_runner import run_cli
from tests.support.oracle import naive_stats
from tests.support.tiny import tiny_llama, tiny_tokenizer


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_pickle_weights_refused_unless_allowed(tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    tok = tiny_tokenizer(300)
    model = tiny_llama(len(tok))
    model.config.save_pretrained(tmp_path / "m")
    torch.save(model.state_dict(), tmp_path / "m" / "pytorch_model.bin")  # a pickle checkpoint
    tok.save_pretrained(tmp_path / "m")
    with pytest.raises(ModelLoadError, match="allow_pickle"):
        load_model(str(tmp_path / "m"))
    with pytest.warns(UserWarning, match="pickle weights"):
        lm = load_model(str(tmp_path / "m"), allow_pickle=True, device="cpu")
    assert lm.vocab_width == 300 and lm.device.type == "cpu"


def test_remote_code_is_never_run_by_default(tmp_path):
    folder = tmp_path / "remote"
    folder.mkdir()
    marker = tmp_path / "ran"
    (folder / "config.json").write_text(
        '{"model_type": "evil", "auto_map": {"AutoConfig": "evil.Cfg", "AutoModelForCausalLM": "evil.M"}}')
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(Exception):
        load_model(str(folder))
    assert not marker.exists()


@pytest.mark.parametrize("spec, needle", [
    ("no-such-org/no-such-model", "unreachable"),
    ("EleutherAI/pythia-1.4b", "unreachable"),  # dots are fine in hub ids: a hub id, not a path
    ("Qwen/Qwen2.5-0.5B", "unreachable"),
    ("a/b/c", "not found"),
    ("./no/such/folder", "not found"),
    ("not a model name!", "not found"),
])
def test_unknown_models_fail_fast_and_clearly(spec, needle):
    start = time.monotonic()
    with pytest.raises(ModelLoadError, match=needle):
        load_model(spec)
    assert time.monotonic() - start < 5


def test_fingerprint_is_stable_and_changes_with_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    tok = tiny_tokenizer(300)
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        tiny_llama(len(tok), seed=seed).save_pretrained(tmp_path / name)
        tok.save_pretrained(tmp_path / name)
    a, b, c = (load_model(str(tmp_path / n)).fingerprint for n in "abc")
    assert a == b != c


@pytest.mark.integration
def test_demo_model_scores_texts():
    """The embedded SmolLM2-135M: converted once to safetensors in the cache, then reloaded (float32 on the CPU,
    also on a GPU machine: the oracle below is float32; bench/gpu.py checks bf16 on CUDA)."""
    lm = load_model("demo", device="cpu")
    again = load_model("demo", device="cpu")
    assert lm.fingerprint == again.fingerprint and lm.device.type == "cpu"
    assert lm.tokenizer.bos_token == "<|im_start|>"  # the Instruct tokenizer's chat BOS …
    text = "The capital of France is Paris. It is known for the Eiffel Tower."
    stats = lm.token_stats([text], cache=False)[0]
    assert stats.boundary_token == "<|endoftext|>"  # … is never used as the document boundary
    ids = [0] + lm.tokenizer(text)["input_ids"]
    expected = naive_stats(lm.model, ids)
    np.testing.assert_allclose(stats.logprob, expected["logprob"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(stats.sigma, expected["sigma"], rtol=1e-4, atol=1e-4)
    texts = [text, "quartz ember bishop monsoon orchard saffron glacier tunnel violin comet"]
    df = score_texts(lm, texts, [m for m, s in METHODS.items() if s.needs == ("stats",)])
    assert df.notna().all().all()
    assert df["loss"][0] > df["loss"][1]  # fluent text beats a word salad


def test_corrupt_weights_are_a_clear_load_error(tmp_path):
    folder = tmp_path / "corrupt"
    folder.mkdir()
    tiny_llama(300).config.save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ModelLoadError, match="could not load the model"):
        load_model(str(folder))


@pytest.mark.parametrize("extra_layers, needle", [(2, "are missing from the files"), (-1, "have no place in the config")])
def test_a_config_that_does_not_match_its_weights_is_refused(tmp_path, extra_layers, needle):
    """More layers in config.json than in the weights loaded with random layers, and fewer dropped weights: silently."""
    folder = tmp_path / "model"
    tok = tiny_tokenizer(300)
    tiny_llama(len(tok), seed=0).save_pretrained(folder)
    tok.save_pretrained(folder)
    load_model(str(folder))  # as saved: loads
    config = json.loads((folder / "config.json").read_text())
    config["num_hidden_layers"] += extra_layers
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=needle) as caught:
        load_model(str(folder))
    assert "model.layers." in str(caught.value) and "do not match its config.json" in str(caught.value)
    (tmp_path / "in.jsonl").write_text('{"text": "one text"}')
    code, _, err = run_cli("score", "--model", folder, "--input", tmp_path / "in.jsonl", "--output", tmp_path / "o.csv")
    assert code == 2 and err.splitlines()[-1].startswith("error: ") and needle in err.splitlines()[-1]
