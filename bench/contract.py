"""Seconds of `score_texts` on the demo before and after a change of the scoring path, measured in one run.

Each case runs in a fresh interpreter with an empty statistics cache, the two trees taking turns `--repeats` times:
the current checkout, and the package at `--before REV` (extracted with `git archive`). Cases: the single-pass
methods; PAC (copies scored in `prepare`); ReCaLL and Con-ReCall together (prefix passes); grad_norm scored twice
in one process (the second call shows what a removed memo cost). The script prints the median seconds of each
case in each tree and their ratio (after ÷ before), and whether both trees gave the same scores (to 10 decimals:
under load the CPU's BLAS may round a forward pass differently from one process to the next, in either tree).

    .venv/bin/python bench/contract.py --before 9fa1a96 [--repeats 3] [--texts 20]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = """
import json, sys, time
import mia_core
from mia_core.inputs import datasets
case, n = sys.argv[1], int(sys.argv[2])
data = datasets.load("demo-wiki")
texts = data["text"].tolist()[:n]
shots = data["text"].tolist()[-10:]
lm = mia_core.load_model("demo-known")
lm.token_stats(texts)  # the shared pass is not what is timed
kwargs = {"single": (["loss", "zlib", "min_k", "min_k_pp"], {}), "pac": (["pac"], {}),
          "recall": (["recall", "con_recall"], {"shots_nonmembers": shots, "shots_members": shots}),
          "grad_norm_twice": (["grad_norm"], {})}[case]
start = time.perf_counter()
df = mia_core.score_texts(lm, texts, kwargs[0], **kwargs[1])
if case == "grad_norm_twice":
    df = mia_core.score_texts(lm, texts, kwargs[0], p=2, **kwargs[1])
print(json.dumps({"seconds": time.perf_counter() - start, "scores": df.round(10).to_dict("list")}))
"""


def extract(rev: str, folder: Path) -> dict:
    """The package and its assets as they were at `rev`, unpacked into `folder`; the environment that imports it
    from there (run in `folder`: the current folder comes first on the path, before the editable install)."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "mia_core", "assets"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return {**os.environ, "PYTHONPATH": str(folder)}


def run(case: str, n: int, env: dict, cwd: Path, cache: Path) -> dict:
    """One case in a fresh interpreter with an empty cache: its seconds and scores."""
    env = {**env, "MIA_LENS_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", CASE, case, str(n)], env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"error: case {case} failed in {cwd}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Time every case in both trees, in turns, and print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the git revision to compare with")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--texts", type=int, default=20)
    parser.add_argument("--cases", default="single,pac,recall,grad_norm_twice")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "before"
        trees = {"after": ({**os.environ}, ROOT), "before": (extract(args.before, old), old)}
        for case in args.cases.split(","):
            times: dict[str, list[float]] = {"after": [], "before": []}
            scores = {}
            for i in range(args.repeats):
                for name, (env, cwd) in trees.items():
                    found = run(case, args.texts, env, cwd, Path(tmp) / f"cache-{case}-{name}-{i}")
                    times[name].append(found["seconds"])
                    scores[name] = found["scores"]
            a, b = statistics.median(times["after"]), statistics.median(times["before"])
            differ = [m for m in scores["after"] if scores["after"][m] != scores["before"].get(m)]
            print(f"{case:16s} after {a:7.2f} s   before {b:7.2f} s   ratio {a / b:5.2f}   "
                  f"same scores: {'yes' if not differ else 'no: ' + ', '.join(differ)}", flush=True)
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
