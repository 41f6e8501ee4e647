"""The envelope every `bench/results/*.json` file carries: what, when, which commit, where, how, under what load.

A result file is `{"benchmark", "date", "commit", "machine", "command", "load", [optional fields], "results"}`;
`results` is the benchmark's own payload, preferably rows: `{case: {figure: value}}`. Optional fields: `note`
(anything a reader needs, and why a field is null), `source` (where a figure came from when not from a run),
`environment` (software versions), `superseded` (why this result is not the current figure: an older tree run
for comparison, an unmerged branch). `bench/performance_page.py` renders them into docs/performance.md.
Stdlib only, so a bench script on a bare GPU machine can import it.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

FIELDS = ("benchmark", "date", "commit", "machine", "command", "load")
ROOT = Path(__file__).resolve().parents[1]


def commit() -> str | None:
    """The checkout's short commit (`+dirty`: tracked files changed); `MIA_LENS_BENCH_COMMIT` for a copy without git."""
    if os.environ.get("MIA_LENS_BENCH_COMMIT"):
        return os.environ["MIA_LENS_BENCH_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo where there is one, else the architecture."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine() or "unknown CPU"


def machine(gpus: list[str] | None = None) -> str:
    """The machine in words: GPUs (if given), CPU cores and model, memory."""
    try:
        memory = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB memory"
    except (ValueError, OSError, AttributeError):
        memory = "memory unknown"
    cpu = f"{os.cpu_count()} CPU cores ({cpu_model()}, {platform.machine()})"
    gpu = ", ".join(f"{gpus.count(name)}× {name}" for name in sorted(set(gpus))) + ", " if gpus else "no GPU, "
    return f"{gpu}{cpu}, {memory}"


def load() -> str | None:
    """The 1-, 5- and 15-minute load averages now (`0.52, 0.61, 0.40`); None where the OS has none."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except (OSError, AttributeError):
        return None


def envelope(benchmark: str, results: object, *, load_before: str | None = None, gpus: list[str] | None = None,
             **extra: object) -> dict:
    """A result file's content: the envelope around `results`; `load_before` is `load()` taken at the run's start."""
    now = load()
    loads = (f"1, 5, 15-min load average {load_before} before the run, {now} after" if load_before and now
             else f"1, 5, 15-min load average {now or load_before}" if now or load_before else None)
    out = {"benchmark": benchmark, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "commit": commit(), "machine": machine(gpus),
           "command": shlex.join([Path(sys.executable).name, *sys.argv]), "load": loads}
    missing = [name for name in ("commit", "load") if out[name] is None]
    if missing:
        unknown = f"Unknown here: {', '.join(missing)} (no git checkout, or no load average)."
        extra["note"] = f"{extra['note']} {unknown}" if extra.get("note") else unknown
    return {**out, **extra, "results": results}


def write_result(path: Path | str, benchmark: str, results: object, **extra: object) -> Path:
    """Write one result file with its envelope (NaN and infinities as JSON's extensions, as before)."""
    path = Path(path)
    path.write_text(json.dumps(envelope(benchmark, results, **extra), indent=1, default=float, ensure_ascii=False) + "\n")
    return path
