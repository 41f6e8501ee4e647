"""The kind for a local model folder or a Hugging Face hub id (every spec no other kind recognises): loaded in process
by transformers — safetensors only unless pickle is allowed, no remote code unless asked, the config checked against
the weights' shapes before anything is built, sharded across devices when it does not fit one."""
from __future__ import annotations

import warnings
from pathlib import Path

from ..errors import ModelLoadError
from ..devices import resolve_device, resolve_dtype
from ..folders import check_weights, folder_fingerprint, pickle_only, resolve_folder
from ..kinds import LoadOptions, ModelKind, register_kind
from ..language_model import LanguageModel
from ..load_lock import LOAD_LOCK
from ..pickled import load_pickled
from ..sharding import capped_device, load_sharded, shard_memory
from ..weight_shapes import check_weight_shapes


def load_folder(folder: Path, name: str, spec: str, options: LoadOptions) -> LanguageModel:
    """A model folder loaded in process as a `LanguageModel` under `name` (what `spec` names)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device, max_memory, allow_pickle = options.device, options.max_memory, options.allow_pickle
    trust_remote_code, max_length = options.trust_remote_code, options.max_length
    device_t = capped_device(max_memory) if max_memory is not None and device == "auto" else resolve_device(device)
    dtype_t = resolve_dtype(options.dtype, device_t)
    check_weights(folder, allow_pickle)
    pickled = pickle_only(folder)  # reached only with allow_pickle: check_weights refuses it otherwise
    cap = shard_memory(folder, device, dtype_t, max_memory)  # None: the whole model on one device
    if cap is not None and pickled:
        raise ModelLoadError(f"{folder}: sharding a model across devices needs safetensors weights, not pickle files")
    if pickled:
        warnings.warn(f"{folder}: loading pickle weights (--allow-pickle): unpickling can run any code the file "
                      "holds; do this only for a source you trust", stacklevel=2)
    try:
        with LOAD_LOCK:
            check_weight_shapes(folder)  # before a model is built: a 400-layer config took 5 GB to refuse
            if cap is not None:
                model, info = load_sharded(folder, dtype_t, cap, trust_remote_code=trust_remote_code)
            else:
                model, info = load_pickled(folder, dtype_t) if pickled else AutoModelForCausalLM.from_pretrained(
                    folder, dtype=dtype_t, trust_remote_code=trust_remote_code, use_safetensors=True,
                    output_loading_info=True)
            check_loading_info(info, folder)
            model = model if cap is not None else model.to(device_t)
            tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
    except ModelLoadError:
        raise
    except Exception as err:  # corrupt weights, unknown architecture, remote code refused, …
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelLoadError(f"could not load the model in {folder}: {first_line}") from err
    return LanguageModel(model, tokenizer, name=name, fingerprint=folder_fingerprint(folder, tokenizer),
                         max_length=max_length, spec=spec)


def check_loading_info(info: dict, folder: Path) -> None:
    """Refuse a model whose weights do not match its config: transformers fills missing weights with random values
    and drops unexpected ones, saying so only in a log line (a 400-layer config over 30 layers of weights loaded and
    scored, its loss off by 0.25 nats a token)."""
    missing, unexpected = sorted(info.get("missing_keys") or ()), sorted(info.get("unexpected_keys") or ())
    mismatched = [str(key[0] if isinstance(key, tuple) else key) for key in info.get("mismatched_keys") or ()]
    problems = [f"{len(keys):,} {what} (e.g. {', '.join(keys[:3])})"
                for keys, what in ((missing, "weights the config needs are missing from the files, so they would be random"),
                                   (unexpected, "weights in the files have no place in the config"),
                                   (mismatched, "weights have another shape than the config's"))
                if keys]
    if problems:
        raise ModelLoadError(f"the weights in {folder} do not match its config.json: {'; '.join(problems)}. Fix the "
                             "config or the weight files: scores of a partly random model mean nothing")


def _load(spec: str, options: LoadOptions) -> LanguageModel:
    folder = resolve_folder(spec, allow_pickle=options.allow_pickle, remote_code=options.trust_remote_code)
    return load_folder(folder, spec, spec, options)


FOLDER = register_kind(ModelKind(
    "folder", "a local model folder or a Hugging Face hub id (downloaded when online, else from the hub cache)",
    "every kind of access: log-probs, the whole distribution, further passes, gradients, generation",
    recognises=lambda spec: True, load=_load, fallback=True))
