"""Scale-out: audit-job throughput of the local backend vs Ray (2 CPU actors) on the same snippets.

Scores the same 400 snippets with a tiny Llama (built here, saved to a folder, so Ray actors load
it by path) through `run_scoring` into a fresh results store: once in this process, once on a local
Ray instance with 2 CPU actors. Runs alternate and the fastest of each counts (the machine is
shared and noisy); the statistics cache is emptied before every run. A Ray run includes starting
its actors and loading the model in each (paid once per job); the Ray instance itself is started
once, before timing, and its start-up is printed separately. On one 2-core machine Ray can only
add overhead; the point of the backend is more machines. Last line: `ratio=<ray / local throughput>`.

    .venv/bin/python bench/scale.py [--snippets 400] [--words 64] [--actors 2] [--repeats 2]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))


def build_model(folder: Path, hidden: int, layers: int) -> None:
    """A small Llama over the tests' tiny tokenizer, saved as safetensors."""
    import torch
    from tiny import tiny_tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tiny_tokenizer(300)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    LlamaForCausalLM(config).eval().save_pretrained(folder)
    tok.save_pretrained(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snippets", type=int, default=400)
    parser.add_argument("--words", type=int, default=64, help="words per snippet")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2, help="alternate local/Ray runs; the fastest of each counts")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mia-scale-"))
    os.environ["MIA_LENS_CACHE"] = str(work / "cache")  # actors started below inherit it
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args, work: Path) -> None:
    import torch
    from tiny import random_texts

    import mia_core
    from mia_core.audit.jobs import AuditSettings, plan_audit, run_scoring
    from mia_core.audit.sources import Book
    from mia_core.model.options import ModelRef
    from mia_core.runs import ray_driver as ray_backend
    from mia_core.runs.store import ResultsStore

    folder = work / "model"
    build_model(folder, args.hidden, args.layers)
    lm = mia_core.load_model(str(folder))
    texts = random_texts(args.snippets, seed=0, min_words=args.words, max_words=args.words)
    settings = AuditSettings(snippet_words=args.words, n_boot=100)
    calibration = [Book("cal-member", "\n".join(texts[: args.snippets // 4]), "bench", 1),
                   Book("cal-non-member", "\n".join(texts[args.snippets // 4: args.snippets // 2]), "bench", 0)]
    audit = [Book("book", "\n".join(texts[args.snippets // 2:]), "bench")]
    n_tokens = sum(s.n_scored for s in lm.token_stats(texts, cache=False))
    n_params = sum(p.numel() for p in lm.model.parameters())
    print(f"model: Llama {args.layers}×{args.hidden} ({n_params / 1e6:.1f}M parameters), {args.snippets} snippets of "
          f"{args.words} words, {n_tokens} tokens; torch threads here: {torch.get_num_threads()}")

    start = time.perf_counter()
    ray = ray_backend.connect(None)
    print(f"Ray local instance started in {time.perf_counter() - start:.1f} s (once; not in the timings below); "
          f"resources {dict(sorted((k, v) for k, v in ray.cluster_resources().items() if k in ('CPU', 'GPU')))}")

    def one(backend: str, i: int) -> tuple[float, float]:
        """(wall seconds, seconds from the first committed batch to the last) of a fresh scoring job."""
        shutil.rmtree(work / "cache" / "stats", ignore_errors=True)
        store = ResultsStore(work / f"{backend}-{i}.duckdb")
        run_id = plan_audit(store, ModelRef(str(folder)), audit, calibration, settings, backend=backend, lm=lm)
        stamps: list[float] = []
        begin = time.perf_counter()
        run_scoring(store, run_id, ModelRef.of(lm), lm=lm, backend=backend, ray_options=ray_backend.RayOptions(actors=args.actors),
                    progress=lambda done, total: stamps.append(time.perf_counter()))
        wall = time.perf_counter() - begin
        assert store.progress(run_id)[0] == args.snippets
        return wall, stamps[-1] - stamps[0]

    t_local = t_ray = steady_ray = steady_local = float("inf")
    for i in range(args.repeats):  # this machine is shared and noisy: alternate, keep the fastest
        wall, steady = one("local", i)
        t_local, steady_local = min(t_local, wall), min(steady_local, steady)
        wall, steady = one("ray", i)
        t_ray, steady_ray = min(t_ray, wall), min(steady_ray, steady)
    per_batch = settings.batch_snippets
    rest = args.snippets - per_batch  # snippets after the first committed batch
    print(f"local (this process)        {t_local:7.2f} s  {args.snippets / t_local:7.1f} snippets/s  "
          f"{n_tokens / t_local:8.0f} tok/s")
    print(f"ray ({args.actors} CPU actors)         {t_ray:7.2f} s  {args.snippets / t_ray:7.1f} snippets/s  "
          f"{n_tokens / t_ray:8.0f} tok/s  (actor start + model load included)")
    print(f"after the first batch: local {rest / steady_local:7.1f} snippets/s, ray {rest / steady_ray:7.1f} snippets/s "
          f"(start-up excluded)")
    print(f"ratio={(args.snippets / t_ray) / (args.snippets / t_local):.3f}")


if __name__ == "__main__":
    main()
