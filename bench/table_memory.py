"""Peak memory (RSS) of reading large tables (issue 45): a 400 M-character book table given to a book audit, and
10⁶ JSONL rows given to `mia score`.

Every case runs in a child process (`mia_core` from `--source`) that reports its own peak resident set (VmHWM, so
the bench's own memory never counts) and its growth over what it held before the work (Python and its imports, and
for `mia score` torch besides; the model is loaded within the growth). The inputs are generated into a temporary folder, a row at a time.

- `books-<csv|jsonl>-long`: `read_books` of a table of `--book-chars` characters in rows of 1,000 characters: one
  book of 350 M characters (over the 50 M bound: refused) around five books of 10 M. The issue's table peaked at
  4.16 GB before its refusal.
- `books-csv-many`: eight books just under the bound (399 M characters): every one is held until the table is read.
- `score-start`: `mia score --methods loss,zlib,min_k,min_k_pp` on `--rows` short JSONL rows (the tiny Llama of
  tests/support/tiny.py), stopped when its progress is first called, after the first batch: what it holds before
  scoring starts (the issue: 3.6 GB for 10⁶ rows).
- `score-full`: the same command run to its end on `--full-rows` rows, and the bytes a row of the output table takes
  when it is written (`DataFrame.memory_usage(deep=True)`, the part that grows with the rows).
- `score-output`: what the output of `--rows` rows costs where scoring 10⁶ rows on a CPU takes hours: parts of
  16,384 score rows as `scoring.parts.score_parts` keeps them (the file's ids, n_tokens, long_text, four floats),
  joined and written by `csv_safe.to_csv_safe` as `mia score` writes them.

    .venv/bin/python bench/table_memory.py [--cases books-csv-long,books-jsonl-long,books-csv-many,score-start,score-full,
        score-output]
        [--book-chars 400000000] [--rows 1000000] [--full-rows 40000] [--source /tmp/before] [--json OUT.json]
    (--source: another checkout's mia_core, e.g. `git archive HEAD~1 mia_core | tar -x -C /tmp/before`)
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.tiny import WORDS, random_texts, save_tiny_model  # noqa: E402  (after the path is set)
from child_peak import run_measured  # noqa: E402
from envelope import load as load_average, write_result  # noqa: E402

ROW_CHARS = 1000
#: What every child starts with: its peak and current resident set from /proc (the bench's own memory never counts).
MEASURE = r"""
import json, re, sys
def mib(field):
    return int(re.search(field + r":\s+(\d+) kB", open("/proc/self/status").read())[1]) / 1024
def report(**figures):
    print(json.dumps({"peak_mib": mib("VmHWM"), "growth_mib": mib("VmHWM") - before, **figures}), file=sys.stderr,
          flush=True)
"""
BOOKS_CHILD = MEASURE + r"""
from mia_core.audit.sources import read_books
before = mib("VmRSS")
books, problems = read_books(sys.argv[1])
report(books=len(books), book_chars=sum(len(b.text) for b in books), problems=[p.message[-90:] for p in problems])
"""
SCORE_CHILD = MEASURE + r"""
import os
from mia_core.cli import main, score
stop = sys.argv[4] == "start"
if stop:  # the first progress call comes once the first batch is scored
    score.progress_bar = lambda *a, **k: lambda *a, **k: (report(stopped="at the first progress"), os._exit(0))
written = {}
def write(df, path, real=score.to_csv_safe):
    written.update(rows=len(df), output_bytes_per_row=int(df.memory_usage(deep=True).sum()) / len(df))
    return real(df, path)
score.to_csv_safe = write
before = mib("VmRSS")
sys.argv = ["mia", "score", "--model", sys.argv[1], "--input", sys.argv[2], "--output", sys.argv[3],
            "--methods", "loss,zlib,min_k,min_k_pp"]
try:
    main()
except SystemExit as exit_:
    if exit_.code:
        raise
report(**written)
"""

OUTPUT_CHILD = MEASURE + r"""
import numpy as np, pandas as pd
from mia_core.csv_safe import to_csv_safe
before = mib("VmRSS")
with open(sys.argv[1]) as rows:
    ids = np.array([json.loads(line)["id"] for line in rows], dtype=object)
frames = []
for start in range(0, len(ids), 16384):
    part = ids[start:start + 16384]
    frame = pd.DataFrame({"id": part, "n_tokens": np.full(len(part), 34), "long_text": "none"})
    for name in ("loss", "zlib", "min_k", "min_k_pp"):
        frame[name] = np.random.default_rng(start).normal(size=len(part))
    frames.append(frame)
del ids, part, frame
df = pd.concat(frames, ignore_index=True)
del frames
per_row = int(df.memory_usage(deep=True).sum()) / len(df)
to_csv_safe(df, sys.argv[2])
report(rows=len(df), output_bytes_per_row=per_row)
"""


def row_texts(seed: int) -> list[str]:
    """500 rows of random words, 1,000 characters each."""
    rng = random.Random(seed)
    out = []
    for _ in range(500):
        text = ""
        while len(text) < ROW_CHARS:
            text += rng.choice(WORDS) + " "
        out.append(text[:ROW_CHARS - 1] + ".")
    return out


def book_rows(shape: str, total_chars: int) -> list[tuple[str, int]]:
    """(book, rows) runs in file order: `long` (one book over the bound, split around five of 10 M) or `many` (eight
    books of 49,900 rows, each just under the 50 M bound)."""
    rows = total_chars // ROW_CHARS
    if shape == "many":
        return [(f"book-{i}", 49_900) for i in range(8)]
    short = rows // 40  # 10 M characters each of 400 M
    long = rows - 5 * short
    return [("short-1", short), ("long", long // 2), *[(f"short-{i}", short) for i in range(2, 6)],
            ("long", long - long // 2)]


def write_books(path: Path, shape: str, total_chars: int) -> None:
    """The book table, a row at a time (CSV: a quoted line break in every 50th row; JSONL: one object a line)."""
    texts = row_texts(1)
    with path.open("w", newline="") as out:
        writer = csv.writer(out) if path.suffix == ".csv" else None
        if writer:
            writer.writerow(["book", "text"])
        i = 0
        for name, n in book_rows(shape, total_chars):
            for _ in range(n):
                text = texts[i % len(texts)]
                text = text[:500] + "\n" + text[501:] if i % 50 == 0 else text
                writer.writerow([name, text]) if writer else out.write(json.dumps({"book": name, "text": text}) + "\n")
                i += 1


def write_rows(path: Path, n: int) -> None:
    """`n` short texts as JSONL rows with ids (about 80 bytes a row)."""
    texts = random_texts(1000, seed=1, min_words=3, max_words=12)
    with path.open("w") as out:
        for i in range(n):
            out.write(json.dumps({"id": f"r{i}", "text": f"{texts[i % len(texts)]} {i}"}) + "\n")


def run_child(script: str, args: list[str], source: Path, folder: Path, timeout: float) -> dict:
    """The child's report (MiB rounded), with its wall time and exit status. Not os.wait4's peak: a child's ru_maxrss
    starts from its parent's peak, and this parent has loaded torch to save the model."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MIA_LENS_CACHE": str(folder / "cache"), "MIA_LENS_CACHE_MAX_MB": "0"}
    _, wall, code, said = run_measured([sys.executable, "-c", script, *args], source, env, timeout)
    lines = [line for line in said.splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {"error": said.strip()[-300:]}
    report = {k: round(v) if isinstance(v, float) else v for k, v in report.items()}
    return {**report, "wall_s": round(wall, 1), "exit": code}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="books-csv-long,books-jsonl-long,books-csv-many,score-start,score-full,"
                                           "score-output")
    parser.add_argument("--book-chars", type=int, default=400_000_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--full-rows", type=int, default=40_000)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--source", type=Path, default=ROOT, help="folder holding the mia_core to run")
    parser.add_argument("--json", type=Path, help="write the results here (bench/results/…)")
    parser.add_argument("--note", default="", help="said in the result file besides where mia_core came from")
    parser.add_argument("--superseded", help="why the result is not the current figure (a tree run to compare)")
    args = parser.parse_args()
    source, load_before, results = args.source.resolve(), load_average(), {}
    with tempfile.TemporaryDirectory(prefix="table-memory-") as tmp:
        folder = Path(tmp)
        model = save_tiny_model(folder / "tiny")
        for case in args.cases.split(","):
            if case.startswith("books-"):
                _, kind, shape = case.split("-")
                path = folder / f"books.{kind}"
                write_books(path, shape, args.book_chars)
                figures = run_child(BOOKS_CHILD, [str(path)], source, folder, args.timeout)
            elif case == "score-output":
                path = folder / "rows.jsonl"
                write_rows(path, args.rows)
                figures = run_child(OUTPUT_CHILD, [str(path), str(folder / "scores.csv")], source, folder, args.timeout)
            else:
                path = folder / "rows.jsonl"
                write_rows(path, args.rows if case == "score-start" else args.full_rows)
                stage = "start" if case == "score-start" else "full"
                figures = run_child(SCORE_CHILD, [str(model), str(path), str(folder / "scores.csv"), stage], source,
                                    folder, args.timeout)
            results[case] = {"input_mb": round(path.stat().st_size / 1e6, 1), **figures}
            path.unlink()
            print(f"{case}: {json.dumps(results[case])}; load {os.getloadavg()[0]:.2f}", flush=True)
    if args.json:
        where = f"mia_core from {'this checkout' if source == ROOT else source}."
        extra = {"superseded": args.superseded} if args.superseded else {}
        write_result(args.json, "table-memory", results, load_before=load_before,
                     note=f"{where} {args.note}".strip(), **extra)


if __name__ == "__main__":
    main()
