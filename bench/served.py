"""The same texts through a served model and through the model loaded in process: tokens per second of each, and of
the served path at each concurrency level, in one run. Last line: `ratio=<served at the best concurrency ÷ in process>`
(> 1: the served path is faster).

The served path exists for reach (a model that is served, or too big for one device), not as a speed-up: this prints
what it costs here. With no --url it starts the test suite's vLLM engine on the demo model (`make vllm` builds it).

    .venv/bin/python bench/served.py [--url http://127.0.0.1:8000] [--texts 96] [--levels 1,4,8,16]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import mia_core
from mia_core.model.demo_weights import demo_folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' engine helpers (tests/support/vllm_server.py)

from tests.support.vllm_server import missing_engine, start_server  # noqa: E402


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", help="a running server serving the demo model as 'demo' (default: start one)")
    parser.add_argument("--texts", type=int, default=96, help="demo-wiki texts (the 128-word bucket first)")
    parser.add_argument("--levels", default="1,4,8,16", help="concurrency levels of the served path")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data = mia_core.datasets.load("demo-wiki").sort_values("bucket", ascending=False)
    texts = data["text"].tolist()[: args.texts]
    server = None
    if args.url is None:
        reason = missing_engine()
        if reason:
            sys.exit(f"error: {reason}")
        server = start_server(demo_folder(), "demo", ROOT / "tests" / "artifacts" / "vllm-bench.log")
        print(f"started vLLM in {server.start_s:.0f} s")
    url = args.url or server.url
    try:
        local = mia_core.load_model("demo", device="cpu")
        tokens = sum(len(s.token_ids) for s in local.token_stats(texts, cache=False))
        in_process = timed(lambda: local.token_stats(texts, cache=False))
        print(f"{len(texts)} texts, {tokens:,} scored tokens; load {os.getloadavg()[0]:.1f}")
        print(f"in process (float32, CPU): {in_process:.2f} s, {tokens / in_process:,.0f} tokens/s")
        best = None
        for level in (int(v) for v in args.levels.split(",")):
            served = mia_core.load_model(f"{url}/v1?model=demo&concurrency={level}")
            seconds = timed(lambda: served.token_stats(texts, cache=False))
            print(f"served, concurrency {level:2d}: {seconds:.2f} s, {tokens / seconds:,.0f} tokens/s")
            best = seconds if best is None else min(best, seconds)
        print(f"ratio={in_process / best:.3f}")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
