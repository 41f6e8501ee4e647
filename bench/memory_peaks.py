"""Peak memory (RSS) and wall time of `mia score` per input size: one long text, and many short rows (issue 31).

Each case runs the CLI in a child process (`python -m mia_core score`, CPU, a fresh statistics cache) and reads
the child's own peak resident set from `os.wait4`, so the figure is what a user's shell would see. Inputs are
generated: one text of N MB as a .txt, the same text in one CSV cell, and JSONL files of short rows; the model is
the tiny Llama of `tests/support/tiny.py` (`save_tiny_model`, 256-token context). With `--tokenizer-only` the
model is `demo` under `--long-text truncate`: the whole text is still read and tokenised with the real demo
tokenizer, but only its first window goes through the model (a full forward of 50 MB on a CPU takes hours).

    .venv/bin/python bench/memory_peaks.py [--cases txt:5,csv:5,txt:50,csv:50,jsonl:1000000] [--tokenizer-only]
        [--timeout 900] [--source /tmp/before]  (another checkout's mia_core, to compare)
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

#: What the generated long text is made of besides words: runs of spaces, newlines, unicode, a long unbroken token.
#: No character beyond the BMP (an emoji): Python would then hold the whole text at 4 bytes a character, not 2.
ODD_PIECES = ("   ", "\n\n", "\n", "naïve café — 東京 ", "x" * 300, "\t")


def long_text(n_bytes: int, seed: int = 0) -> str:
    """About `n_bytes` of UTF-8 prose: random words with the odd piece mixed in every ~200 words."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        piece = rng.choice(ODD_PIECES) if rng.random() < 0.005 else rng.choice(WORDS) + " "
        parts.append(piece)
        size += len(piece.encode())
    return "".join(parts).strip() + "."


def write_inputs(folder: Path, kind: str, size: float) -> Path:
    """The input file of one case: `txt:MB`, `csv:MB` (one text in one cell), or `jsonl:ROWS` (short texts)."""
    if kind == "jsonl":
        path = folder / f"rows-{int(size)}.jsonl"
        texts = random_texts(1000, seed=1, min_words=3, max_words=12)
        with path.open("w") as fh:
            for i in range(int(size)):
                fh.write(json.dumps({"id": f"r{i}", "text": texts[i % len(texts)] + f" {i}"}) + "\n")
        return path
    text = long_text(int(size * 1e6))
    path = folder / f"long-{size:g}MB.{kind}"
    if kind == "txt":
        path.write_text(text)
    else:
        with path.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["id", "text"])
            writer.writerow(["one", text])
    return path


def run_case(model: str, path: Path, out: Path, cache: Path, extra: list[str], timeout: float,
             source: Path = ROOT) -> tuple[float, float, int]:
    """(peak RSS in MB, wall seconds, exit status) of one `mia score` run in a child process (`mia_core` from
    `source`: another checkout's, e.g. `git archive HEAD mia_core | tar -x -C /tmp/before`, to compare)."""
    command = [sys.executable, "-m", "mia_core", "score", "--model", model, "--input", str(path),
               "--output", str(out), "--device", "cpu", "--methods", "loss,zlib,min_k,min_k_pp", *extra]
    env = {**os.environ, "MIA_LENS_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "true"}
    peak, wall, code, said = run_measured(command, source, env, timeout)
    if code:
        print(f"  exit {code}: {said[-400:]!r}", file=sys.stderr)
    return peak, wall, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="txt:5,csv:5,txt:50,csv:50,jsonl:1000000")
    parser.add_argument("--tokenizer-only", action="store_true", help="demo model, --long-text truncate")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--source", type=Path, default=ROOT, help="folder holding the mia_core to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = "demo" if args.tokenizer_only else str(save_tiny_model(folder / "tiny"))
        extra = ["--long-text", "truncate"] if args.tokenizer_only else []
        print(f"model: {'demo (truncate)' if args.tokenizer_only else 'tiny Llama, 256-token context'}; "
              f"load: {os.getloadavg()[0]:.2f}")
        print(f"{'case':>16} {'input MB':>9} {'peak RSS MB':>12} {'wall s':>8}")
        for case in args.cases.split(","):
            kind, size = case.split(":")
            path = write_inputs(folder, kind, float(size))
            with tempfile.TemporaryDirectory(dir=folder) as cache:
                rss, wall, code = run_case(model, path, folder / "scores.csv", Path(cache), extra, args.timeout,
                                          args.source.resolve())
            mb = path.stat().st_size / 1e6
            note = "" if code == 0 else f"  (exit {code})"
            print(f"{case:>16} {mb:9.1f} {rss:12.0f} {wall:8.1f}{note}", flush=True)
            path.unlink()


if __name__ == "__main__":
    main()
