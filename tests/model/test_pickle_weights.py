"""`--allow-pickle` loads a pickle checkpoint that holds more than tensors, and only under that opt-in (issue 29).

torch ≥ 2.6 unpickles tensors only by default and transformers 5 reads `.bin` files that way whatever it is
told, so a `pytorch_model.bin` holding a training step or numpy arrays failed with "Weights only load failed"
even with the flag. The checkpoints here are a tiny Llama saved with extra non-tensor entries, and one saved as
a whole pickled module; their scores are compared with the same weights saved as safetensors, and with a naive
float64 computation on the original model.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from mia_core import ModelLoadError, load_model, score_texts

from tests.support.cli_runner import run_cli
from tests.support.oracle import naive_stats
from tests.support.tiny import random_texts, tiny_llama, tiny_tokenizer

METHODS = ["loss", "zlib", "min_k", "min_k_pp"]


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))


def saved_folders(tmp_path):
    """(the original model, its safetensors folder, a .bin with non-tensor entries, a .bin of the whole module)."""
    tok = tiny_tokenizer(300)
    model = tiny_llama(len(tok), seed=3).eval()
    folders = {kind: tmp_path / kind for kind in ("safe", "extras", "module")}
    model.save_pretrained(folders["safe"])
    for kind in ("extras", "module"):
        model.config.save_pretrained(folders[kind])
    torch.save({**model.state_dict(), "step": np.int64(1200), "optimizer_note": np.arange(4.0), "epoch": 3,
                "tag": {"run": "tiny"}}, folders["extras"] / "pytorch_model.bin")
    torch.save(model, folders["module"] / "pytorch_model.bin")
    for folder in folders.values():
        tok.save_pretrained(folder)
    return model, tok, folders


def test_pickle_with_objects_is_refused_without_the_flag_and_loads_with_it(tmp_path):
    model, tok, folders = saved_folders(tmp_path)
    texts = random_texts(3, seed=4)
    expected = score_texts(load_model(str(folders["safe"]), device="cpu"), texts, METHODS)
    for kind in ("extras", "module"):
        with pytest.raises(ModelLoadError, match="allow_pickle"):
            load_model(str(folders[kind]), device="cpu")
        with pytest.warns(UserWarning, match="pickle weights .*only for a source you trust"):
            lm = load_model(str(folders[kind]), device="cpu", allow_pickle=True)
        got = score_texts(lm, texts, METHODS)
        np.testing.assert_allclose(got[METHODS].to_numpy(), expected[METHODS].to_numpy(), rtol=1e-6)
        ids = [tok.bos_token_id] + tok(texts[0])["input_ids"]
        stats = lm.token_stats([texts[0]], cache=False)[0]
        np.testing.assert_allclose(stats.logprob, naive_stats(model, ids)["logprob"], rtol=1e-4, atol=1e-5)


def test_cli_refuses_pickle_in_one_line_and_scores_it_with_the_flag(tmp_path):
    _, _, folders = saved_folders(tmp_path)
    texts = random_texts(3, seed=5)
    src = tmp_path / "in.csv"
    pd.DataFrame({"text": texts}).to_csv(src, index=False)

    def score(folder, *flags):
        out = tmp_path / f"{folder.name}{len(flags)}.csv"
        code, _, err = run_cli("score", "--model", folder, "--input", src, "--output", out, "--methods",
                               ",".join(METHODS), "--device", "cpu", *flags)
        return code, err, out

    code, err, _ = score(folders["extras"])
    assert code == 2 and "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "--allow-pickle" in errors[0] and "Weights only" not in err
    code, err, out = score(folders["extras"], "--allow-pickle")
    assert code == 0, err
    assert "warning: " in err and "pickle weights" in err
    code, err, safe_out = score(folders["safe"])
    assert code == 0, err
    np.testing.assert_allclose(pd.read_csv(out)[METHODS].to_numpy(), pd.read_csv(safe_out)[METHODS].to_numpy(),
                               rtol=1e-6)
