"""Model folders: a local folder or a Hugging Face hub id resolved to a folder (the hub cache when offline), its weights
checked (safetensors; pickle only when allowed), its fingerprint, and its tokenizer alone."""
from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

from .demo_weights import demo_folder
from .errors import ModelLoadError
from .identity import file_sha256, tokenizer_fingerprint

WEIGHT_SUFFIXES_SAFE = (".safetensors",)
WEIGHT_SUFFIXES_PICKLE = (".bin", ".pt", ".pth", ".ckpt")
HUB_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"]
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def load_tokenizer(source: str):
    """The tokenizer alone of a spec ("demo" and its variants, a folder, or a hub id): a served model's, read here."""
    from transformers import AutoTokenizer

    folder = demo_folder() if source in ("demo", "demo-known", "demo-traps") else Path(source).expanduser()
    try:
        return AutoTokenizer.from_pretrained(folder if folder.is_dir() else source, trust_remote_code=False)
    except Exception as err:  # a missing folder, an unknown hub id offline, a tokenizer that needs remote code
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelLoadError(f"could not load the tokenizer {source!r}: {first_line}") from None


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
