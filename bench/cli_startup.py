"""Seconds of `mia --help`, beside `python -c "import torch"` for scale, measured in one run.

Each command runs in a fresh interpreter, taking turns, `--repeats` times; the script prints the
median and the fastest wall-clock seconds of each, and whether `mia --help` left torch and
transformers unimported. With `--before REV` it also times `mia --help` of the package as it was at a
git revision (extracted with `git archive` into a temporary folder, run from there), e.g. the commit
before the lazy command line.

    .venv/bin/python bench/cli_startup.py [--repeats 5] [--before 63ea285]
"""
from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELP = "import sys; sys.argv = ['mia', '--help']; from mia_core.cli import main; main()"
LOADED = ("import sys, contextlib, io; sys.argv = ['mia', '--help']; from mia_core.cli import main\n"
          "with contextlib.redirect_stdout(io.StringIO()):\n    main()\n"
          "print(*[m for m in ('torch', 'transformers', 'pandas') if m in sys.modules])")


def seconds(command: list[str], env: dict | None, cwd: Path) -> float:
    """Wall-clock seconds of one run of `command` (output discarded; a failure stops the script)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    return time.perf_counter() - start


def extract(rev: str, folder: Path) -> dict:
    """mia_core as it was at `rev`, unpacked into `folder`; the environment that imports it from there (run in
    `folder`: the current folder comes first on the path, before the editable install's finder)."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "mia_core"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return {**os.environ, "PYTHONPATH": str(folder)}


def main() -> None:
    """Time the commands in turns and print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", default=None, help="also time `mia --help` at this git revision")
    args = parser.parse_args()
    mia = str(Path(sys.executable).with_name("mia"))
    with tempfile.TemporaryDirectory() as tmp:
        commands = {"mia --help": ([mia, "--help"], None, ROOT),
                    'python -c "import torch"': ([sys.executable, "-c", "import torch"], None, ROOT)}
        if args.before:
            commands[f"mia --help at {args.before}"] = ([sys.executable, "-c", HELP], extract(args.before, Path(tmp)),
                                                        Path(tmp))
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, (command, env, cwd) in commands.items():
                times[name].append(seconds(command, env, cwd))
    load = os.getloadavg()[0]
    print(f"{args.repeats} runs each, taking turns; load average at the end {load:.2f} on {os.cpu_count()} CPUs")
    for name, values in times.items():
        print(f"{name:34s} median {statistics.median(values):6.2f} s   fastest {min(values):6.2f} s")
    loaded = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True, check=True, cwd=ROOT)
    print(f"imported by mia --help: {loaded.stdout.strip() or 'none of torch, transformers, pandas'}")


if __name__ == "__main__":
    main()
