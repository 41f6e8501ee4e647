"""Peak memory (RSS) of `mia audit-books` reading a large source of books and planning its snippets (issue 29).

docs/security.md bounds one source of books at 2 GB (`MAX_SOURCE_BYTES`). This generates such a source in a temporary
folder (a folder of `.txt` books, or a zip of them: `--kind zip`, stored uncompressed so its declared sizes are the
text's), then runs, in a child process, what `mia audit-books` does before it scores anything: load the model,
read the sources (`read_audit_inputs`), cut every book into 512-word snippets and plan them into a fresh results
store (`plan_audit`). Scoring reads its snippets from the store a batch at a time, so the peak of an audit is here.
The child's own peak resident set comes from `os.wait4`, and its peak before any book is read (Python, torch,
DuckDB, the model) from `resource.getrusage`. The model is the tiny Llama of `tests/support/tiny.py` (its weights
are a few MB: the model is not what this measures); the calibration set is six generated books of 2,000 words in
`members/` and `non_members/`.

    .venv/bin/python bench/source_memory.py [--total-mb 2000] [--book-mb 50] [--kind folder|zip]
        [--source /tmp/before]  (another checkout's mia_core, e.g. `git archive HEAD~1 mia_core | tar -x -C DIR`)
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.tiny import WORDS, save_tiny_model  # noqa: E402  (after the path is set)
from child_peak import run_measured  # noqa: E402

#: What the child runs (in the checkout given by --source): the CLI's reading and planning, nothing scored.
CHILD = """
import resource, sys, time
from mia_core.audit.jobs import AuditSettings, plan_audit
from mia_core.audit.sources import read_audit_inputs
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore
books, calibration, model, store = sys.argv[1:5]
results = ResultsStore(store)
ref = ModelRef(model)
lm = ref.load()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
inputs = read_audit_inputs(books, calibration)
run_id = plan_audit(results, ref, inputs.books, inputs.calibration, AuditSettings(), inputs.problems, lm=lm)
done, total = results.progress(run_id)
print(f"{total} snippets planned in {time.perf_counter() - start:.1f} s; peak RSS before reading "
      f"(Python, torch, DuckDB, the model) {before:.0f} MB", file=sys.stderr)
"""


def book_text(n_bytes: int, seed: int) -> str:
    """About `n_bytes` of ASCII prose: random words, a paragraph break every ~100 words."""
    rng = random.Random(seed)
    block = " ".join(rng.choice(WORDS) for _ in range(200_000))  # ~1.5 MB, repeated with a marker per copy
    block = "\n\n".join(block[i:i + 700] for i in range(0, len(block), 700))
    copies = max(1, n_bytes // (len(block) + 12))
    return "".join(f"\n\npart {seed}-{i}\n\n{block}" for i in range(copies))


def write_source(folder: Path, total_mb: float, book_mb: float, kind: str) -> tuple[Path, int, int]:
    """(the source, its number of books, its largest book in bytes): books of `book_mb` until `total_mb`."""
    n_books = max(1, round(total_mb / book_mb))
    text = book_text(int(book_mb * 1e6), seed=1).encode()
    books = folder / "books"
    books.mkdir()
    for i in range(n_books):
        (books / f"book-{i:03d}.txt").write_bytes(f"Book {i}.\n".encode() + text)
    largest = max(p.stat().st_size for p in books.iterdir())
    if kind == "folder":
        return books, n_books, largest
    archive = folder / "books.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as out:
        for path in sorted(books.iterdir()):
            out.write(path, path.name)
            path.unlink()
    return archive, n_books, largest


def write_calibration(folder: Path) -> Path:
    """Three member and three non-member books of 2,000 random words (the labels only need to exist here)."""
    rng = random.Random(2)
    for label in ("members", "non_members"):
        (folder / "calibration" / label).mkdir(parents=True)
        for i in range(3):
            (folder / "calibration" / label / f"{label}-{i}.txt").write_text(" ".join(rng.choices(WORDS, k=2000)))
    return folder / "calibration"


def run_child(source: Path, books: Path, calibration: Path, model: Path, store: Path, timeout: float) -> tuple[float, float, int, str]:
    """(peak RSS in MB, wall seconds, exit status, the child's last words) of one read-and-plan run."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MIA_LENS_CACHE": str(store.parent / "cache")}
    peak, wall, code, said = run_measured([sys.executable, "-c", CHILD, str(books), str(calibration), str(model),
                                           str(store)], source, env, timeout)
    return peak, wall, code, (said.strip().splitlines() or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mb", type=float, default=2000)
    parser.add_argument("--book-mb", type=float, default=50)
    parser.add_argument("--kind", choices=["folder", "zip"], default="folder")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--source", type=Path, default=ROOT, help="folder holding the mia_core to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = save_tiny_model(folder / "tiny")
        books, n_books, largest = write_source(folder, args.total_mb, args.book_mb, args.kind)
        size = sum(p.stat().st_size for p in ([books] if books.is_file() else books.iterdir()))
        print(f"source: {args.kind}, {n_books} books, {size / 1e6:.0f} MB, largest book {largest / 1e6:.1f} MB; "
              f"mia_core from {args.source}; load {os.getloadavg()[0]:.2f}", flush=True)
        rss, wall, code, said = run_child(args.source.resolve(), books, write_calibration(folder), model, folder / "store.duckdb", args.timeout)
        print(f"peak RSS {rss:.0f} MB, {wall:.0f} s, exit {code}: {said}; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
