"""mia_core/model/weight_shapes.py: a config.json that does not fit its weights is refused before any model is built,
in one sentence naming the tensor, both shapes and the config field behind them."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel

from mia_core import ModelLoadError, load_model

from tests.support.oracle import naive_stats
from tests.support.tiny import save_tiny_model, tiny_gpt2, tiny_tokenizer

TEXT = "quartz ember bishop monsoon orchard saffron glacier tunnel violin comet"


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))


def edit_config(folder, **fields) -> None:
    """Change fields of the folder's config.json, leaving its weights as they are."""
    config = json.loads((folder / "config.json").read_text())
    config.update(fields)
    (folder / "config.json").write_text(json.dumps(config))


def refusal(folder) -> str:
    """The message `load_model` refuses the folder with."""
    with pytest.raises(ModelLoadError) as caught:
        load_model(str(folder), device="cpu")
    return str(caught.value)


# the tiny Llama of tests/support/tiny.py: vocabulary 300, hidden 48, 4 heads and 2 key/value heads of 12, MLP 96
@pytest.mark.parametrize("field, value, tensor, in_files, by_config", [
    ("vocab_size", 400, "model.embed_tokens.weight", "(300, 48)", "(400, 48)"),
    ("hidden_size", 64, "model.embed_tokens.weight", "(300, 48)", "(300, 64)"),
    ("intermediate_size", 128, "model.layers.0.mlp.gate_proj.weight", "(96, 48)", "(128, 48)"),
    ("num_attention_heads", 8, "model.layers.0.self_attn.q_proj.weight", "(48, 48)", "(96, 48)"),
    ("num_key_value_heads", 4, "model.layers.0.self_attn.k_proj.weight", "(24, 48)", "(48, 48)"),
])
def test_a_mismatched_size_names_the_tensor_both_shapes_and_the_field(tmp_path, field, value, tensor, in_files,
                                                                      by_config):
    folder = save_tiny_model(tmp_path / "model")
    edit_config(folder, **{field: value})
    message = refusal(folder)
    assert f"{tensor} is {in_files} in the weight files but {by_config} by config.json" in message
    assert field in message and "ignore_mismatched_sizes" not in message and "\n" not in message


@pytest.mark.parametrize("layers, says", [
    (4, "config.json claims 4 layers (num_hidden_layers) but the weight files hold 2"),
    (1, "config.json claims 1 layer (num_hidden_layers) but the weight files hold 2"),
])
def test_a_layer_count_the_weights_do_not_have_is_refused(tmp_path, layers, says):
    folder = save_tiny_model(tmp_path / "model")
    edit_config(folder, num_hidden_layers=layers)
    assert says in refusal(folder)


def test_a_gpt2_layer_count_is_named_as_its_config_spells_it(tmp_path):
    folder = tmp_path / "gpt2"
    tiny_gpt2(280).save_pretrained(folder)
    tiny_tokenizer(280).save_pretrained(folder)
    load_model(str(folder), device="cpu")  # as saved: loads
    edit_config(folder, n_layer=5)
    assert "config.json claims 5 layers (n_layer) but the weight files hold 2" in refusal(folder)


def test_a_sharded_checkpoint_is_read_through_its_index(tmp_path):
    folder = tmp_path / "sharded"
    LlamaForCausalLM.from_pretrained(save_tiny_model(tmp_path / "model")).save_pretrained(folder, max_shard_size="40KB")
    tiny_tokenizer(300).save_pretrained(folder)
    assert (folder / "model.safetensors.index.json").exists() and not (folder / "model.safetensors").exists()
    load_model(str(folder), device="cpu")  # as saved: loads
    edit_config(folder, vocab_size=512)
    assert "model.embed_tokens.weight is (300, 48) in the weight files but (512, 48) by config.json" in refusal(folder)


def test_a_400_layer_config_is_refused_before_it_takes_memory(tmp_path):
    """Before this check, transformers built and randomly initialised all 400 layers (1.5 GB here, 5 GB for the demo
    model's shapes) before the missing weights were noticed."""
    folder = tmp_path / "wide"
    config = LlamaConfig(vocab_size=300, hidden_size=256, intermediate_size=1024, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(folder)
    tiny_tokenizer(300).save_pretrained(folder)
    edit_config(folder, num_hidden_layers=400)
    probe = textwrap.dedent(r"""
        import json, re, sys
        from mia_core.model.errors import ModelLoadError
        from mia_core.model.loading import load_model
        def mib(field):  # VmHWM, not ru_maxrss: that one keeps the pytest parent's peak across fork and exec
            return int(re.search(field + r":\s+(\d+) kB", open("/proc/self/status").read())[1]) / 1024
        before = mib("VmRSS")
        try:
            load_model(sys.argv[1], device="cpu")
            message = ""
        except ModelLoadError as err:
            message = str(err)
        print(json.dumps({"growth_mib": mib("VmHWM") - before, "message": message}))
    """)
    done = subprocess.run([sys.executable, "-c", probe, str(folder)], capture_output=True, text=True, timeout=300)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert "config.json claims 400 layers (num_hidden_layers) but the weight files hold 2" in answer["message"]
    assert answer["growth_mib"] < 300, answer


def test_a_matching_folder_still_loads_and_scores_the_same(tmp_path):
    folder = save_tiny_model(tmp_path / "model")
    lm = load_model(str(folder), device="cpu")
    reference = LlamaForCausalLM.from_pretrained(folder).eval()
    ids = [0] + lm.tokenizer(TEXT)["input_ids"]
    np.testing.assert_allclose(lm.token_stats([TEXT], cache=False)[0].logprob, naive_stats(reference, ids)["logprob"],
                               rtol=1e-5, atol=1e-5)


def test_tied_weights_saved_from_the_base_model_still_load(tmp_path):
    """A checkpoint without the `model.` prefix and without lm_head (tied): transformers matches it, and so does
    the check."""
    folder = tmp_path / "base"
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=300, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    LlamaModel(config).save_pretrained(folder)
    tiny_tokenizer(300).save_pretrained(folder)
    edit_config(folder, architectures=["LlamaForCausalLM"])
    lm = load_model(str(folder), device="cpu")
    assert lm.model.lm_head.weight.data_ptr() == lm.model.model.embed_tokens.weight.data_ptr()
    edit_config(folder, num_hidden_layers=3)
    assert "config.json claims 3 layers (num_hidden_layers) but the weight files hold 2" in refusal(folder)
