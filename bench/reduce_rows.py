"""The CPU reduction's rows per call, before and after, in one process: a 512-row head chunk, and the demo end to end.

`forward.reduce_rows` reduces a head chunk of float32 logits a block of rows at a time on the CPU: as many rows as fit
`REDUCE_CHUNK_ELEMENTS` (2 MiB), at least `REDUCE_CHUNK_ROWS`. Before, the floor was 64 rows, so a 49k vocabulary
was reduced 64 rows (12 MiB a temporary) per call; now 8. The arms alternate `--repeats` times (median shown):

- `reduce_rows` of 512 rows of random logits at several vocabulary widths (1,000: the smoke models; 32,000;
  49,152: the demo; 128,256: Llama 3), before and after, with the statistics compared bit for bit;
- `token_stats` of `--demo-texts` WikiMIA-like texts on `demo` (no cache), before and after.

    .venv/bin/python bench/reduce_rows.py [--repeats 7] [--demo-texts 40] [--json OUT]

Last line: `ratio=<after ÷ before, reduce_rows at the demo's 49,152>`.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu as G  # noqa: E402  (bench/gpu.py: the WikiMIA-like workload)
from envelope import load as load_average, write_result  # noqa: E402

import mia_core  # noqa: E402
from mia_core.model import forward  # noqa: E402

WIDTHS = (1000, 32000, 49152, 128256)
ROWS = 512
#: The floor of rows per call before this change.
BEFORE_ROWS = 64


def with_floor(rows: int, work):
    """Run `work()` with `REDUCE_CHUNK_ROWS` set to `rows`; its result and seconds."""
    kept = forward.REDUCE_CHUNK_ROWS
    forward.REDUCE_CHUNK_ROWS = rows
    try:
        start = time.perf_counter()
        out = work()
        return out, time.perf_counter() - start
    finally:
        forward.REDUCE_CHUNK_ROWS = kept


def alternate(repeats: int, work, floors: dict[str, int]) -> tuple[dict[str, float], dict[str, object]]:
    """Median seconds of `work` under each floor, the floors taking turns; the last result of each."""
    seconds: dict[str, list[float]] = {name: [] for name in floors}
    last: dict[str, object] = {}
    for repeat in range(repeats):
        for name in (list(floors) if repeat % 2 == 0 else list(reversed(floors))):
            last[name], took = with_floor(floors[name], work)
            seconds[name].append(took)
    return {name: statistics.median(found) for name, found in seconds.items()}, last


def main() -> None:
    """Time both floors on each width and on the demo, print a table, the ratio last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--demo-texts", type=int, default=40, help="0 skips the demo")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    started = load_average()
    floors = {"before": BEFORE_ROWS, "after": forward.REDUCE_CHUNK_ROWS}
    results: dict[str, dict] = {}
    for width in WIDTHS:
        generator = torch.Generator().manual_seed(width)
        logits = torch.randn(ROWS, width, generator=generator) * 3 + torch.linspace(0, 8, width)
        targets = torch.randint(0, width, (ROWS,), generator=generator)
        forward.reduce_rows(logits, targets)  # warm
        times, last = alternate(args.repeats, lambda: forward.reduce_rows(logits, targets), floors)
        same = all(torch.equal(last["before"][k], last["after"][k]) for k in last["before"])
        results[f"reduce_rows, {ROWS} rows x {width:,} vocabulary"] = {
            "before": {"ms": round(1e3 * times["before"], 3),
                       "rows_per_call": max(BEFORE_ROWS, forward.REDUCE_CHUNK_ELEMENTS // width)},
            "after": {"ms": round(1e3 * times["after"], 3),
                      "rows_per_call": max(forward.REDUCE_CHUNK_ROWS, forward.REDUCE_CHUNK_ELEMENTS // width)},
            "after_over_before": round(times["after"] / times["before"], 3), "same_bits": same}
    if args.demo_texts:
        lm = mia_core.load_model("demo", device="cpu")
        texts = G.wiki_like(args.demo_texts)
        lm.token_stats(texts[:4], cache=False)  # warm
        times, last = alternate(max(3, args.repeats // 2), lambda: lm.token_stats(texts, cache=False), floors)
        same = all((a.logprob == b.logprob).all() and (a.rank == b.rank).all()
                   for a, b in zip(last["before"], last["after"]))
        results[f"demo token_stats, {len(texts)} WikiMIA-like texts"] = {
            "before": {"seconds": round(times["before"], 3)}, "after": {"seconds": round(times["after"], 3)},
            "after_over_before": round(times["after"] / times["before"], 3), "same_bits": same}
    print(f"{'case':52s} {'before':>10s} {'after':>10s} {'after÷before':>13s} same bits")
    for case, row in results.items():
        unit = "ms" if "ms" in row["before"] else "seconds"
        print(f"{case:52s} {row['before'][unit]:10.3f} {row['after'][unit]:10.3f} {row['after_over_before']:13.3f} "
              f"{row['same_bits']}")
    print(f"load average: {load_average()}")
    if args.json:
        write_result(args.json, "cpu-reduce-rows", results, load_before=started,
                     note=f"Rows per call: at least {BEFORE_ROWS} (before) or {forward.REDUCE_CHUNK_ROWS} (after), as "
                          f"many as fit {forward.REDUCE_CHUNK_ELEMENTS} float32 logits; medians of alternating runs.")
    print(f"ratio={results[f'reduce_rows, {ROWS} rows x 49,152 vocabulary']['after_over_before']:.3f}")


if __name__ == "__main__":
    main()
