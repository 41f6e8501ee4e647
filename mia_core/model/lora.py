"""LoRA targets per architecture, and merging a saved adapter into a loaded model (demo-known, GDS)."""
from __future__ import annotations

import hashlib
from pathlib import Path

from .identity import file_sha256
from .language_model import LanguageModel

ADAPTER_FILE = "adapter_model.safetensors"
#: LoRA targets per architecture: attention q/k/v/o and FFN gate/up/down, or their equivalents.
LORA_TARGETS = {
    "llama": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "mistral": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "qwen2": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "gpt2": ["c_attn", "c_proj", "c_fc"],
    "gpt_neox": ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"],
}


def attach_adapter(base: LanguageModel, adapter_dir: str | Path, *, name: str, spec: str | None = None) -> LanguageModel:
    """A new LanguageModel: base weights with the LoRA adapter merged in (the base object is consumed)."""
    from peft import PeftModel  # heavy optional import, only when an adapter is merged

    adapter_dir = Path(adapter_dir)
    if not (adapter_dir / ADAPTER_FILE).exists():
        raise FileNotFoundError(f"no adapter at {adapter_dir}; build it with: mia demo build")
    merged = PeftModel.from_pretrained(base.model, adapter_dir).merge_and_unload()
    fingerprint = hashlib.sha256(f"{base.fingerprint}|{file_sha256(adapter_dir / ADAPTER_FILE)}".encode()).hexdigest()[:16]
    return LanguageModel(merged, base.tokenizer, name=name, fingerprint=fingerprint, max_length=base.max_length,
                         spec=spec or str(adapter_dir))
