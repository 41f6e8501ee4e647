"""Rebuild `demo-known`: SmolLM2-135M plus a LoRA adapter trained on the demo's member texts only.

`build_demo` makes the seeded split, trains the adapter (`mia_core.demo.train`; with `traps=True` the demo-traps
adapter, `mia_core.demo.traps`), and writes the
committed assets: `adapter_model.safetensors` (bf16), `adapter_config.json`, `manifest.json` (which
items are members: ids and text hashes) and `build.json` (settings, losses, wall time). Not needed
at run time: `load_model("demo-known")` reads those assets (`mia_core.model.lora.attach_adapter`).
"""
from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Callable

import torch

from ..inputs.datasets import SplitSizes, make_split, rebuild_texts
from ..model.builtin import demo_known_dir, demo_traps_dir
from ..model.language_model import LanguageModel
from ..model.loading import load_model
from ..model.lora import ADAPTER_FILE
from ..version import package_versions
from .traps import TRAPS_FILE, choose_traps, extra_copies, trap_passages
from .train import LoraSettings, train_lora


def member_texts(manifest: dict) -> list[str]:
    """Every member text of every demo set (the adapter's training data)."""
    texts = []
    for name in manifest["datasets"]:
        df = rebuild_texts(name, manifest)
        texts += df.loc[df["label"] == 1, "text"].tolist()
    return texts


def build_demo(out_dir: str | Path | None = None, *, seed: int = 0, sizes: SplitSizes = SplitSizes(),
               settings: LoraSettings | None = None, base: LanguageModel | None = None,
               progress: Callable[[int, int, float], None] | None = None, traps: bool = False) -> dict:
    """Split, train and save the demo-known assets (with `traps`: the demo-traps assets, the member texts plus extra
    copies of the trap passages); returns the build record."""
    out = Path(out_dir) if out_dir is not None else (demo_traps_dir() if traps else demo_known_dir())
    settings = settings or LoraSettings(seed=seed)
    start = time.perf_counter()
    manifest = make_split(seed, sizes)
    texts = member_texts(manifest)
    chosen = choose_traps(manifest, seed) if traps else []
    if traps:
        texts += extra_copies(trap_passages(chosen, manifest))
    base = base or load_model("demo", device="cpu")
    peft_model, losses = train_lora(base.model, base.tokenizer, texts, settings, progress)
    out.mkdir(parents=True, exist_ok=True)
    peft_model.save_pretrained(out, safe_serialization=True)
    _to_bf16(out / ADAPTER_FILE)
    (out / "README.md").unlink(missing_ok=True)  # peft's generic model card
    peft_model.unload()  # leave the base model as it was
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    if traps:
        (out / TRAPS_FILE).write_text(json.dumps({"seed": seed, "traps": chosen}, indent=1))
    record = {
        "seed": seed, "settings": settings.__dict__, "base_fingerprint": base.fingerprint, "traps": traps,
        "n_member_texts": len(texts), "steps": len(losses),
        "loss_first_10": sum(losses[:10]) / max(1, len(losses[:10])),
        "loss_last_10": sum(losses[-10:]) / max(1, len(losses[-10:])),
        "wall_time_s": round(time.perf_counter() - start, 1),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
        "versions": {"torch": torch.__version__, **package_versions("transformers", "peft")},
    }
    (out / "build.json").write_text(json.dumps(record, indent=1))
    return record


def _to_bf16(path: Path) -> None:
    """Store adapter weights in bf16 (half the size; the stored adapter is what defines demo-known)."""
    from safetensors.torch import load_file, save_file

    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in load_file(path).items()}
    save_file(tensors, path, metadata={"format": "pt"})
