"""Where the host's time goes per text in `score_texts`, part by part, before and after a change, in one call (CPU).

One profiled `score_texts` call with the five statistics-only methods (bench/gpu.py's arm (s)) and a real, empty
statistics cache (every entry written, on the writer thread unless `--inline-writes`), after one warm-up call. For each part of the statistics pass — the model's
batch (forward, head and reduction), tokenising with offsets, padding a batch, splitting a batch's statistics,
assembling `TokenStats`, the cache's key, lookup and write, and each method — the cumulative seconds under cProfile
divided by the texts. The profiler slows Python a little, so read the parts against each other, not as wall time.

Each measurement runs in a child process. `--before DIR` (a tree holding an earlier `mia_core` and `bench`, e.g.
`git archive ebfca80 mia_core bench | tar -x -C DIR`) measures that tree too, the two sides alternating `--repeats`
times; each part is the median over the repeats (a 2-core machine's noise is ±20% a run).

    .venv/bin/python bench/host_parts.py [--model smoke-1b|smoke-7b|demo] [--texts 400] [--inline-writes]
        [--before DIR [--before-env NAME=VALUE]] [--repeats 5] [--json OUT]

Last line: `ratio=<the host's parts per text ÷ the model's batch per text>`, or with `--before`,
`ratio=<the host's parts per text after ÷ before>`; the line before it gives the same for the parts issue 41's goal
names (tokenising, the methods, assembling; goal: at most 1/3). `--before-env` runs the earlier tree as its CLI ran
it (ebfca80's CLI turned the tokenizer's threads off for every command: `TOKENIZERS_PARALLELISM=false`).
"""
from __future__ import annotations

import argparse
import cProfile
import importlib
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from envelope import load as load_average, write_result  # noqa: E402  (stdlib only)

#: (module path under mia_core, function): what the part is called in the table. Parts of one name are one part
#: (an earlier tree's function and its successor); where both ran, the larger (the caller's) counts.
PARTS = {
    ("model/forward.py", "batch_stats"): "the model's batch (forward, head, float32 reduction)",
    ("model/encoding.py", "encode_texts"): "tokenising with offsets",
    ("model/forward.py", "batch_arrays"): "padding a batch",
    ("model/pipeline.py", "_finish"): "splitting a batch's statistics",
    ("model/stats_model.py", "_assemble"): "assembling TokenStats",
    ("model/stats_model.py", "_assemble_group"): "assembling TokenStats",
    ("model/stats_cache.py", "key"): "cache key (SHA-256 of the text)",
    ("model/stats_cache.py", "get"): "cache lookup",
    ("model/stats_cache.py", "put"): "cache write (on this thread: writes_behind off)",
    ("model/stats_cache.py", "put_many"): "cache write (on this thread: writes_behind off)",
    ("model/cache_writes.py", "put"): "cache write (handed to the writer thread)",
    ("model/cache_writes.py", "put_many"): "cache write (handed to the writer thread)",
    ("methods/loss.py", "loss"): "method: loss",
    ("methods/zlib.py", "zlib_ratio"): "method: zlib",
    ("methods/min_k.py", "min_k"): "method: min_k",
    ("methods/min_k_pp.py", "min_k_pp"): "method: min_k_pp",
    ("methods/dc_pdd/__init__.py", "dc_pdd"): "method: dc_pdd",
    ("scoring/stream.py", "score_batch"): "methods: all five, per finished batch (batch forms)",
    ("model/text_windows.py", "fill"): "joining a text's windows",
}
MODEL_PART = PARTS[("model/forward.py", "batch_stats")]
#: The parts issue 41's CPU goal names ("tokenising, methods, assembling"), by the start of their names above.
GOAL_PREFIXES = ("tokenising", "method", "assembling")


def part_seconds(profile: cProfile.Profile) -> dict[str, float]:
    """Cumulative seconds of every part in PARTS, from the profile (one part's names: the larger)."""
    found: dict[tuple[str, str], float] = {}
    for (filename, _, function), (_, _, _, cumulative, _) in pstats.Stats(profile).stats.items():
        key = (filename.split("mia_core/")[-1], function)
        if "mia_core/" in filename and key in PARTS:
            found[key] = found.get(key, 0.0) + cumulative
    parts: dict[str, float] = {}
    for key, seconds in found.items():
        parts[PARTS[key]] = max(parts.get(PARTS[key], 0.0), seconds)
    return parts


def measure(tree: Path, model: str, n_texts: int, inline_writes: bool) -> dict:
    """One profiled `score_texts` call of the `mia_core` in `tree` (after a warm-up): seconds per part and in all.

    Imports here, not at the top: which `mia_core` (and which bench/gpu.py, its workloads) is the tree's to say.
    """
    sys.path[:0] = [str(tree / "bench"), str(tree)]
    G = importlib.import_module("gpu")  # bench/gpu.py: the workloads, the smoke models, the arms
    mia_core = importlib.import_module("mia_core")
    StatsCache = importlib.import_module("mia_core.model.stats_cache").StatsCache
    torch = importlib.import_module("torch")
    with tempfile.TemporaryDirectory() as tmp:
        lm = cpu_model(model, tmp, G, mia_core, StatsCache, torch)
        lm.writes_behind = not inline_writes
        writer = writer_clock(StatsCache)
        texts = G.wiki_like(n_texts)
        freq = mia_core.build_frequency_table(lm.tokenizer, texts, vocab_size=lm.vocab_width)

        def run():
            lm.stats_cache = StatsCache(tempfile.mkdtemp(dir=tmp))  # empty: every text's entry is written
            return mia_core.score_texts(lm, texts, G.STATS_ONLY, freq=freq)

        run()  # warm
        writer.clear()
        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.enable()
        run()
        profile.disable()
        total = time.perf_counter() - start
    return {"texts": len(texts), "total_s": total, "parts_s": part_seconds(profile), "writer_cpu_s": sum(writer),
            "load": load_average()}


def cpu_model(name: str, tmp: str, G, mia_core, StatsCache, torch):
    """`demo` (real weights, float32) or a smoke Llama of bench/gpu.py (bf16, random, built from a config), on the
    CPU, from the modules given (a tree's own, in `measure`)."""
    if name == "demo":
        return mia_core.load_model("demo", device="cpu")
    return G.random_llama(name.replace("smoke", "llama"), G.bench_tokenizer(True), torch.device("cpu"), torch.bfloat16,
                          True, StatsCache(os.path.join(tmp, "smoke")))


def writer_clock(cache_class) -> list[float]:
    """CPU seconds of each `put` made off the main thread (the writer thread, which cProfile does not see), as a
    list the caller reads and clears: wraps the tree's `StatsCache.put`, which every tree's writer calls."""
    seconds: list[float] = []
    put = cache_class.put

    def timed_put(self, key, stats):
        if threading.current_thread() is threading.main_thread():
            return put(self, key, stats)
        start = time.thread_time()
        try:
            return put(self, key, stats)
        finally:
            seconds.append(time.thread_time() - start)

    cache_class.put = timed_put
    return seconds


def child_run(tree: Path, args: argparse.Namespace, env: dict[str, str]) -> dict:
    """`measure` in a fresh process (the tree's own imports, nothing warm from another side), with `env` added to
    this process's environment."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), "--model", args.model,
               "--texts", str(args.texts)] + (["--inline-writes"] if args.inline_writes else [])
    done = subprocess.run(command, capture_output=True, text=True, check=False, env={**os.environ, **env})
    if done.returncode != 0:
        sys.exit(f"error: the measurement of {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def medians(runs: list[dict]) -> dict:
    """Milliseconds a text per part (median over the runs), the host parts together, and their ratio to the model."""
    n = runs[0]["texts"]
    names = sorted({name for run in runs for name in run["parts_s"]})
    parts = {name: 1e3 * statistics.median(run["parts_s"].get(name, 0.0) for run in runs) / n for name in names}
    host = [sum(s for name, s in run["parts_s"].items() if name != MODEL_PART) for run in runs]
    model = [run["parts_s"][MODEL_PART] for run in runs]
    return {"texts": n, "runs": len(runs), "parts_ms_per_text": parts,
            "host_ms_per_text": 1e3 * statistics.median(host) / n,
            "goal_parts_ms_per_text": 1e3 * statistics.median(goal_parts(run["parts_s"]) for run in runs) / n,
            "host_ms_per_text_each_run": [round(1e3 * h / n, 4) for h in host],
            "model_ms_per_text": 1e3 * statistics.median(model) / n,
            "host_over_model": statistics.median(h / m for h, m in zip(host, model)),
            "writer_thread_cpu_ms_per_text": 1e3 * statistics.median(run["writer_cpu_s"] for run in runs) / n,
            "loads": [run["load"] for run in runs]}


def goal_parts(parts_s: dict[str, float]) -> float:
    """Seconds of the parts issue 41's goal names: tokenising, the methods, assembling `TokenStats`."""
    return sum(s for name, s in parts_s.items() if name.startswith(GOAL_PREFIXES))


def rounded(value):
    """Figures to 4 decimals below 1 and 3 above (the runs' spread is far wider), nested as they come."""
    if isinstance(value, float):
        return round(value, 4 if abs(value) < 1 else 3)
    if isinstance(value, dict):
        return {key: rounded(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [rounded(inner) for inner in value]
    return value


def show(side: str, model: str, summary: dict) -> None:
    """Print one side's parts, the model's batch first, then the rest largest first."""
    parts = summary["parts_ms_per_text"]
    print(f"{side} — {model}: {summary['texts']} WikiMIA-like texts, median of {summary['runs']} profiled run(s)")
    for name in sorted(parts, key=lambda name: (name != MODEL_PART, -parts[name])):
        print(f"  {name:52s} {parts[name]:9.3f} ms a text")
    print(f"  {'the host parts above, together':52s} {summary['host_ms_per_text']:9.3f} ms a text "
          f"(each run: {', '.join(f'{h:.3f}' for h in summary['host_ms_per_text_each_run'])})")
    goal_label = "of them, the goal's (tokenising, methods, assembling)"
    print(f"  {goal_label:52s} {summary['goal_parts_ms_per_text']:9.3f} ms a text")
    print(f"  {'beside them: the writer thread (CPU, not profiled)':52s} "
          f"{summary['writer_thread_cpu_ms_per_text']:9.3f} ms a text")


def main() -> None:
    """Measure this tree (and `--before`'s, alternating), print each part's milliseconds per text, the ratio last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smoke-1b", choices=["smoke-1b", "smoke-7b", "demo"])
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--inline-writes", action="store_true",
                        help="write the cache on this thread, as before the writer thread (cache_writes.WriteBehind)")
    parser.add_argument("--before", type=Path, help="an earlier tree (mia_core and bench) to measure in the same call")
    parser.add_argument("--repeats", type=int, default=1, help="profiled runs per side; each part's median is shown")
    parser.add_argument("--before-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the --before tree's runs only (e.g. "
                             "TOKENIZERS_PARALLELISM=false, as ebfca80's CLI set it for every command)")
    parser.add_argument("--json", type=Path, help="write the medians here, in bench/results' envelope")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child, args.model, args.texts, args.inline_writes)))
        return
    before_env = dict(pair.split("=", 1) for pair in args.before_env if "=" in pair)
    if len(before_env) != len(args.before_env) or (before_env and not args.before):
        sys.exit("error: --before-env takes NAME=VALUE, and only with --before")
    started = load_average()
    sides = {"after": HERE.parent, **({"before": args.before.resolve()} if args.before else {})}
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for repeat in range(args.repeats):
        order = list(sides) if repeat % 2 == 0 else list(reversed(sides))  # alternate: neither side always first
        for side in order:
            runs[side].append(child_run(sides[side], args, before_env if side == "before" else {}))
    summaries = {side: rounded(medians(found)) for side, found in runs.items()}
    for side in reversed(list(sides)):
        show(side, args.model, summaries[side])
    print(f"load average: {load_average()}")
    if args.before:
        ratio = summaries["after"]["host_ms_per_text"] / summaries["before"]["host_ms_per_text"]
        goal = summaries["after"]["goal_parts_ms_per_text"] / summaries["before"]["goal_parts_ms_per_text"]
        print(f"the goal's parts (tokenising, methods, assembling) after ÷ before: {goal:.3f}")
        results = {args.model: {**summaries["after"], "before": summaries["before"], "before_env": before_env,
                                "after_over_before": ratio, "goal_parts_after_over_before": goal}}
    else:
        ratio = summaries["after"]["host_over_model"]
        results = {args.model: summaries["after"]}
    if args.json:
        write_result(args.json, "host-parts", results, load_before=started,
                     note="host_ms_per_text: the host's parts together (every part but the model's batch), the "
                          "median over the runs; the profiler's cumulative seconds (its overhead included)"
                          + (f"; before: the tree at {args.before}." if args.before else "."))
    print(f"ratio={ratio:.3f}")


if __name__ == "__main__":
    main()
