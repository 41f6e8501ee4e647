"""Write docs/performance.md from bench/results/*.json: per benchmark and machine, the latest figure of each case.

Every result file carries the envelope of bench/envelope.py. For each benchmark and machine the page shows, case
by case (a row of the file's `results`), the row of the latest dated file that has it (rows of files of the same
date side by side), leaving out files marked `superseded`; every other file is listed under "Earlier and comparison
runs". The site serves the raw files under results/ (docs/_hooks/raw_results.py adds them at build time), so the
page links them there. Deterministic: run it again and the
page is the same. tests/test_performance_page.py checks that the committed page is what this writes.

    python bench/performance_page.py
"""
from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from envelope import FIELDS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS, PAGE = ROOT / "bench" / "results", ROOT / "docs" / "performance.md"
RAW_LINK = "results"  # where the site serves bench/results/*.json (docs/_hooks/raw_results.py)
NOT_RECORDED = "not recorded"
Rows = dict[str, dict[str, object]]


@dataclass(frozen=True)
class Spec:
    """How the page presents one benchmark: title, what it measures, how to reproduce it, which figures."""

    title: str
    about: str
    reproduce: str | None = None
    columns: tuple[tuple[str, str], ...] = ()  # (flattened key, header); empty: every figure, in order
    rows: Callable[[object], Rows] | None = None  # the file's results as {case: figures}; None: `default_rows`
    by_machine: bool = True  # False: figures that do not depend on the machine (AUROC), one table for all


def flatten(value: object, prefix: str = "") -> dict[str, object]:
    """Nested dicts as one level of dotted keys (`before.host_ms_b`); other values as they are."""
    if not isinstance(value, dict):
        return {prefix or "value": value}
    out: dict[str, object] = {}
    for key, inner in value.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        out.update(flatten(inner, name) if isinstance(inner, dict) else {name: inner})
    return out


def default_rows(results: object) -> Rows:
    """Rows from `{case: {figure: value}}`; a flat payload of figures is one row with an empty case name."""
    if isinstance(results, dict) and results and all(isinstance(v, dict) for v in results.values()):
        return {str(case): flatten(figures) for case, figures in results.items()}
    return {"": flatten(results)}


def lifted_rows(results: dict) -> Rows:
    """Rows whose `max_diff` figures stand beside the others, and bare booleans as `identical`."""
    rows: Rows = {}
    for case, value in results.items():
        if isinstance(value, dict):
            rest = {k: v for k, v in value.items() if k != "max_diff"}
            rows[case] = {**flatten(value.get("max_diff", {})), **flatten(rest)}
        else:
            rows[case] = {"identical": value}
    return rows


def auroc_rows(results: dict) -> Rows:
    """bench/gpu.py's `auroc` part (per dtype, per method) as one row per method."""
    bf16, fp32, diff = results.get("bfloat16", {}), results.get("float32", {}), results.get("abs_diff", {})
    return {method: {"auroc_bf16": bf16.get("auroc", {}).get(method), "auroc_fp32": fp32.get("auroc", {}).get(method),
                     "abs_diff": diff.get(method), "seconds_bf16": bf16.get("seconds", {}).get(method),
                     "seconds_fp32": fp32.get("seconds", {}).get(method)}
            for method in bf16.get("auroc", {})}


AUROC_COLUMNS = (("name", "method"), ("auroc", "AUROC"), ("auroc_ci", "95% CI"), ("tpr@1%fpr", "TPR@1%FPR"))
SPECS: dict[str, Spec] = {
    "gpu-throughput": Spec(
        "Statistics pass on a GPU: throughput",
        "Tokens per second of scoring 2,000 WikiMIA-like texts (Wikipedia lead paragraphs of 32–256 words) and "
        "BookMIA-like 512-word snippets in bf16. Arms: (a) the authors' loop, one text at a time; (b) `token_stats` "
        "plus the five statistics-only methods; (s) the same through `score_texts`, which scores them while the next "
        "batch runs; (c) the bare batched forward of the same batches, nothing reduced; the floor is 2 × matmul "
        "parameters × tokens ÷ the machine's measured matmul rate. A time ratio of 1.15 means 15% more time than the "
        "arm it is compared with; (b) ÷ (a) is a speed-up; NaN: an arm not run (`--loop-stride 0`). Models: `demo` "
        "(real weights) and random Llamas of 135M (demo's shape), 1B and 7B parameters. Host ms/text is ((b) − (c)) "
        "÷ texts.",
        "python3 bench/gpu.py --parts throughput --models llama-1b,llama-135m",
        (("tokens", "tokens"), ("tok_s_a", "(a) tok/s"), ("tok_s_s", "(s) tok/s"), ("tok_s_c", "(c) tok/s"),
         ("tok_s_floor", "floor tok/s"), ("b_over_a", "(b) ÷ (a) speed"), ("s_over_c_time", "(s) ÷ (c) time"),
         ("b_over_c_time", "(b) ÷ (c) time"), ("c_over_floor_time", "(c) ÷ floor time"),
         ("host_ms_per_text", "host ms/text"))),
    "gpu-correctness": Spec(
        "Statistics on a GPU: agreement",
        "Largest absolute difference of the token statistics (log p, μ, σ) on `demo` between two ways of computing "
        "them. bf16 against float64 shows bf16's own rounding; batched against one text at a time, and the fused "
        "Triton reduction against PyTorch's, should be near 0; a batch budget that does not fit must halve and give "
        "identical statistics.",
        "python3 bench/gpu.py --parts correctness",
        (("logprob", "log p"), ("mu", "μ"), ("sigma", "σ"), ("asked", "budget asked"), ("ended_on", "ended on"),
         ("identical", "identical")), lifted_rows),
    "gpu-auroc": Spec(
        "AUROC in bf16 and float32 on a GPU",
        "AUROC of every method on demo-wiki under `demo-known`, in bf16 and in float32: bf16's rounding should not "
        "move the rankings (target: |Δ| ≤ 0.005). Seconds per method beside them.",
        "python3 bench/gpu.py --parts auroc",
        (("auroc_bf16", "AUROC bf16"), ("auroc_fp32", "AUROC float32"), ("abs_diff", "|Δ|"),
         ("seconds_bf16", "s bf16"), ("seconds_fp32", "s float32")), auroc_rows),
    "gpu-heavy": Spec(
        "Heavy methods on a GPU",
        "The heavy methods' fast paths against their references: Infilling on one KV cache of the shared prefix "
        "against one pass per position, GDS features batched against a per-text loop (ratio = reference seconds ÷ "
        "fast seconds), and self-proposed neighbours' seconds per text.",
        "python3 bench/gpu.py --parts heavy"),
    "gpu-pipeline-identity": Spec(
        "Statistics on a GPU: the pipeline against the code before it",
        "Largest difference between the pipelined statistics pass and the code before it (0 = bit for bit the "
        "same): launching the next batch ahead or not, the earlier tree, out-of-memory halving, `score_texts` "
        "streamed or given the statistics.", None, (), lifted_rows),
    "gpu-environment": Spec(
        "GPU machines: measured ceilings",
        "Each bench/gpu.py run measures its machine's bf16 matmul rate and device copy bandwidth; the floors of the "
        "throughput table come from them.",
        "python3 bench/gpu.py (any part)",
        (("gpu", "GPU"), ("torch", "torch"), ("matmul_tflops", "bf16 matmul TFLOP/s"), ("copy_gbs", "copy GB/s"))),
    "gpu-host-profile": Spec(
        "GPU runs: the host's share",
        "Where the host's time goes around a GPU's statistics pass, from a profile: tokenising before the first "
        "batch, zlib's compression, the rest of the host's work, against the device's time per text."),
    "demo-wiki-auroc": Spec(
        "The known-membership demo: AUROC",
        "AUROC with its 95% bootstrap interval of four methods on demo-wiki (240 members, 240 non-members) under the "
        "base model `demo`, which saw both halves alike (≈ 0.5 expected), and under `demo-known`, whose adapter was "
        "trained on the members. The blind baseline uses no model.",
        ".venv/bin/mia eval --model demo-known --input demo-wiki --methods loss,zlib,min_k,min_k_pp --output m.json",
        AUROC_COLUMNS, by_machine=False),
    "demo-wiki-gds-split": Spec(
        "The known-membership demo: GDS on its held-out split",
        "GDS is supervised: fitted on a seeded 30% of demo-wiki and read on the 70% held out, beside three "
        "unsupervised methods on the same rows (`demo-known`).",
        ".venv/bin/mia eval --model demo-known --input demo-wiki --methods loss,min_k,min_k_pp,gds --fit 0.3 "
        "--output gds-vs.json", AUROC_COLUMNS, by_machine=False),
    "demo-wiki-every-method": Spec(
        "Every method side by side (demo-known on demo-wiki)",
        "Every method on the same 105 held-out demo-wiki texts (63 members, 42 non-members) under `demo-known`: "
        "AUROC with its 95% interval and TPR at 1% FPR. With 42 non-members one false positive is already 2.4%, so "
        "TPR@1%FPR ranks methods only coarsely; the blind baseline (no model) shows how far the texts alone separate "
        "the classes. The commands of each run are listed under the table.", None, AUROC_COLUMNS, by_machine=False),
    "demo-wiki-every-method-base": Spec(
        "The same rows under the base model",
        "The held-out rows above under the base model `demo`, which saw members and non-members alike: AUROC near "
        "0.5 is what a sound method gives here.", None, AUROC_COLUMNS, by_machine=False),
    "cpu-single-pass": Spec(
        "Single-pass methods on the CPU",
        "Token statistics plus every single-pass method ÷ the bare batched forward of the same batches on `demo` "
        "(target ≤ 1.15), and the speed-up over a one-text-at-a-time reference loop.",
        ".venv/bin/python bench/single_pass.py --texts 200 --tokens 128"),
    "cpu-host-overhead": Spec(
        "Host work per text on the CPU, before and after a change",
        "The host's work per text beyond the model's batch computation (`host_ms_b`, ms) and arm (b) ÷ the bare "
        "forward (`b_over_c`), for this tree and an earlier one, run in turns in fresh processes; "
        "`max_score_diff` = 0 means identical scores.",
        ".venv/bin/python bench/host_overhead.py --before REV --json out.json",
        (("after.host_ms_b", "host ms/text"), ("before.host_ms_b", "host ms/text, earlier tree"),
         ("after.b_over_c", "(b) ÷ (c)"), ("before.b_over_c", "(b) ÷ (c), earlier tree"),
         ("after.seconds_b", "(b) s"), ("before.seconds_b", "(b) s, earlier tree"),
         ("max_score_diff", "max |Δ score|"))),
    "cpu-reduce-rows": Spec(
        "The CPU reduction's rows per call",
        "Milliseconds of `reduce_rows` on a 512-row head chunk (and seconds of arm (b), or of the demo's "
        "`token_stats`), with the earlier and the current number of rows per call, alternating in one process; "
        "`same_bits`: the statistics are identical.",
        ".venv/bin/python bench/reduce_rows.py --repeats 15 --demo-texts 40 --json out.json"),
    "host-parts": Spec(
        "Where the host's time goes (CPU)",
        "Milliseconds a text of the host's parts of `score_texts` on the CPU (tokenising, the methods, assembling "
        "`TokenStats`, splitting and padding batches, the cache's key, lookup and hand-over: every profiled part "
        "but the model's batch), under cProfile; beside them, the CPU time of the writer thread (which writes the "
        "cache entries and which the profiler does not see); `before` is the same figure for an earlier tree measured in the "
        "same call, the two sides alternating, each the median of its runs (older files: one run a side). "
        "Issue 41's goal was after ÷ before ≤ 1/3 against ebfca80 for the parts it names (tokenising, the methods, "
        "assembling: `goal_parts`); `before_env`: the environment the earlier tree ran in (TOKENIZERS_PARALLELISM=false "
        "is how ebfca80's CLI ran every command).",
        ".venv/bin/python bench/host_parts.py --model smoke-1b --before DIR --repeats 5 --json out.json",
        (("host_ms_per_text", "host ms/text"), ("before.host_ms_per_text", "host ms/text, earlier tree"),
         ("after_over_before", "after ÷ before"), ("goal_parts_ms_per_text", "goal's parts ms/text"),
         ("before.goal_parts_ms_per_text", "goal's parts ms/text, earlier tree"),
         ("goal_parts_after_over_before", "goal's parts after ÷ before"),
         ("before_env.TOKENIZERS_PARALLELISM", "earlier tree's TOKENIZERS_PARALLELISM"),
         ("model_ms_per_text", "model's batch ms/text"),
         ("writer_thread_cpu_ms_per_text", "writer thread CPU ms/text"),
         ("before.writer_thread_cpu_ms_per_text", "writer thread CPU ms/text, earlier tree"),
         ("runs", "profiled runs a side"))),
    "cache-writes": Spec(
        "Statistics-cache writes on a writer thread",
        "Seconds to score into an empty statistics cache with its entries written on a writer thread, written "
        "inline on the scoring thread, and with a cache that keeps nothing (the floor); ratio = writer ÷ inline.",
        ".venv/bin/python bench/cache_writes.py --model smoke-1b"),
    "stats-cache-entry": Spec("Statistics-cache entries", "Milliseconds to write and to read one cache entry."),
    "extraction": Spec(
        "Verbatim extraction",
        "`mia extract` on `demo` on the CPU: our pass ÷ the bare batched forward of the same windows (below 1: "
        "cheaper than that forward), windows and tokens per second, and one book at two strides.",
        ".venv/bin/python bench/extraction.py --plays 2 --repeats 2"),
    "audit-extraction": Spec(
        "A book audit with extraction",
        "Seconds of a book audit with `--extraction` and without it, and their ratio.",
        ".venv/bin/python bench/audit_extraction.py"),
    "audit-page": Spec(
        "A book audit from the dashboard",
        "The same demo book audit scored from the CLI and from the dashboard's Book audit page (medians of "
        "alternating runs, in seconds; ratio = page ÷ CLI).",
        ".venv/bin/python bench/audit_page.py --json out.json",
        (("snippets", "snippets"), ("cli_s", "CLI s"), ("page_s", "page s"), ("ratio_page_over_cli", "page ÷ CLI"))),
    "audit-page-open": Spec(
        "The Book audit page opening",
        "Seconds from a click on Book audit in the menu of a warmed server to the page's Run button in headless "
        "Chromium (bound: 5 s), the first time with the model's speed still measured in the background; CPU "
        "seconds Chromium and the server spent on an open. Busy loops stand in for a parallel test worker.",
        ".venv/bin/python bench/audit_page_open.py --repeats 5 [--busy 2] --json out.json",
        (("median_open_s", "open s (median)"), ("max_open_s", "open s (max)"),
         ("ratio_median_over_bound", "÷ 5 s bound"), ("first_estimate_later", "first open: estimate follows"),
         ("first_estimate_s", "first open: estimate after s"), ("chromium_cpu_s", "Chromium CPU s"),
         ("server_cpu_s", "server CPU s"))),
    "ray-scale": Spec(
        "Ray against the local backend",
        "Audit throughput (snippets per second) of the local backend and of Ray with 2 CPU actors on one machine; "
        "ratio = Ray ÷ local. On one 2-core machine Ray can only add overhead: its point is more machines.",
        ".venv/bin/python bench/scale.py --snippets 400 --words 64 --actors 2 --repeats 2"),
    "cli-startup": Spec(
        "Command-line start-up",
        "Seconds of `mia --help`, which answers without importing torch or transformers.",
        ".venv/bin/python bench/cli_startup.py"),
    "served-logprobs": Spec(
        "Served models: log-probs against in-process",
        "Largest difference between a vLLM server's prompt log-probs and the in-process ones on three demo-wiki "
        "texts.", "make test (tests/served/)"),
    "demo-wiki-simmia": Spec(
        "SimMIA and SimMIA* on the known-membership demo",
        "AUROC with its 95% bootstrap interval of SimMIA (all-MiniLM-L6-v2) and SimMIA* on a seeded, balanced sample "
        "of demo-wiki's shortest texts under `demo-known` (membership known) and the base `demo` (membership "
        "invisible: near 0.5), with `loss` on the same texts as a check. A small sample and far fewer samples per "
        "word than the authors' (see the run's note): the intervals are wide.",
        ".venv/bin/python bench/simmia_heldout.py --json out.json",
        (("name", "method"), ("model", "model"), ("auroc", "AUROC"), ("auroc_ci", "95% CI"),
         ("seconds_model", "s (model, all methods)"))),
    "test-suite": Spec(
        "The test suite",
        "Seconds of pytest for the whole suite on the 2-core machine: serially and on two workers, in fresh clones "
        "(`bash .ci/run`, which also sets up) and in a checkout. Lists are repeated runs.", "make test"),
}


def escape(text: str) -> str:
    """Text that stays inside one Markdown table cell and renders as itself (pipes, emphasis, HTML, line breaks)."""
    text = " ".join(text.split()).replace("<", "&lt;")
    return re.sub(r"([\\`*_|\[\]])", r"\\\1", text)


def number(value: float) -> str:
    """A figure as a reader wants it: thousands grouped above 1,000, else four significant digits."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def cell(value: object) -> str:
    """One table cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, list):
        return ", ".join(cell(v) for v in value)
    return escape(str(value))


def code(text: str) -> str:
    """Inline code that survives backticks inside."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def link(name: str) -> str:
    """A link to a raw result file, as the site serves it."""
    return f"[{name}]({RAW_LINK}/{name})"


def spec_of(benchmark: str) -> Spec:
    """The benchmark's presentation; an unknown benchmark gets its name and every figure."""
    return SPECS.get(benchmark, Spec(benchmark, ""))


def machine_of(data: dict) -> str:
    """The machine words a file's rows are grouped under."""
    return data.get("machine") or "machine not recorded"


def latest(files: dict[str, dict], spec: Spec) -> list[tuple[str, str, dict]]:
    """(case, file, figures) of the latest dated file having each case, ties side by side; superseded files left out."""
    best: dict[str, tuple[str, list[tuple[str, dict]]]] = {}
    for name in sorted(files):
        data = files[name]
        if data.get("superseded"):
            continue
        date = data.get("date") or ""
        for case, figures in (spec.rows or default_rows)(data.get("results")).items():
            held = best.get(case)
            if held is None or date > held[0]:
                best[case] = (date, [(name, figures)])
            elif date == held[0]:
                held[1].append((name, figures))
    return [(case, name, figures) for case in sorted(best) for name, figures in best[case][1]]


def columns(spec: Spec, rows: Iterable[dict]) -> list[tuple[str, str]]:
    """The figures a table shows: the spec's that any row has, else every key in order of first appearance."""
    rows = list(rows)
    present = {key for row in rows for key in row}
    if spec.columns:
        return [(key, header) for key, header in spec.columns if key in present]
    return [(key, key) for key in dict.fromkeys(key for row in rows for key in row)]


def table(spec: Spec, shown: list[tuple[str, str, dict]]) -> list[str]:
    """A Markdown table of the shown rows, each ending in a link to its raw file."""
    cols = columns(spec, (figures for _, _, figures in shown))
    with_case = any(case for case, _, _ in shown)
    header = (["case"] if with_case else []) + [escape(h) for _, h in cols] + ["run"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for case, name, figures in shown:
        cells = ([escape(case)] if with_case else []) + [cell(figures.get(key)) for key, _ in cols] + [link(name)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def run_line(name: str, data: dict) -> str:
    """One run's envelope as a list item: file, date, commit, load, command, note, source."""
    parts = [f"date {data.get('date') or NOT_RECORDED}",
             f"commit {code(data['commit']) if data.get('commit') else NOT_RECORDED}",
             f"load: {data.get('load') or NOT_RECORDED}",
             f"command: {code(data['command']) if data.get('command') else NOT_RECORDED}",
             f"machine: {machine_of(data)}"]
    text = f"- {link(name)}: " + "; ".join(parts) + "."
    for field in ("superseded", "note", "source"):
        if data.get(field):
            label = {"superseded": "Not current", "note": "Note", "source": "Source"}[field]
            text += f" {label}: {' '.join(str(data[field]).split())}"
            text += "" if text.endswith(".") else "."
    return text


INTRO = """# Performance

<!-- Generated by bench/performance_page.py from bench/results/*.json: do not edit; run
`python bench/performance_page.py` after adding a result file. -->

Every figure on this page is a measurement kept as a JSON file in `bench/results/`, with the date, the commit, the
machine, the exact command and the machine's load of the run that produced it. For each benchmark and machine this
page shows the latest figure of every case, each row linking its raw file; older runs, and runs of an earlier tree
measured only for comparison, are listed below each benchmark. A time ratio compares two ways of doing the same
work (1.15: 15% more time); read ratios measured on one machine in one run, not seconds across machines. A
measurement taken on a loaded machine says so in its load.

To add a measurement, run the benchmark (the bench scripts that write JSON wrap their figures in the common
envelope of `bench/envelope.py`), save the file under a new name in `bench/results/`, and run
`python bench/performance_page.py`. A new measurement is a new file; no figure is edited by hand.
"""


def render(files: dict[str, dict]) -> str:
    """The whole page for result files given as {file name: content}."""
    out = [INTRO]
    order = {benchmark: i for i, benchmark in enumerate(SPECS)}
    benchmarks = sorted({d["benchmark"] for d in files.values()}, key=lambda b: (order.get(b, len(order)), b))
    for benchmark in benchmarks:
        spec = spec_of(benchmark)
        mine = {name: data for name, data in files.items() if data["benchmark"] == benchmark}
        out += [f"## {spec.title}", ""]
        if spec.about:
            out += [spec.about, ""]
        if spec.reproduce:
            out += [f"Reproduce: {code(spec.reproduce)}", ""]
        shown_files: set[str] = set()
        group = machine_of if spec.by_machine else (lambda data: "")
        for machine in sorted({group(d) for d in mine.values()}):
            here = {name: data for name, data in mine.items() if group(data) == machine}
            shown = latest(here, spec)
            if not shown:
                continue
            shown_files |= {name for _, name, _ in shown}
            out += [f"### {escape(machine)}", ""] if machine else []
            out += [*table(spec, shown), "", "Runs in this table:", ""]
            out += [run_line(name, here[name]) for name in sorted({n for _, n, _ in shown})] + [""]
        earlier = sorted(set(mine) - shown_files)
        if earlier:
            out += ["Earlier and comparison runs:", ""]
            out += [run_line(name, mine[name]) for name in earlier] + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def read_results(folder: Path = RESULTS) -> dict[str, dict]:
    """Every result file in the folder, by file name."""
    return {path.name: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def missing_fields(data: dict) -> list[str]:
    """The envelope fields (and `results`) a result file lacks."""
    return [field for field in (*FIELDS, "results") if field not in data]


def main() -> None:
    """Check every file's envelope, write the page."""
    files = read_results()
    bad = {name: missing_fields(data) for name, data in files.items() if missing_fields(data)}
    if bad:
        raise SystemExit(f"result files without the envelope's fields: {bad}")
    PAGE.write_text(render(files))
    print(f"wrote {PAGE.relative_to(ROOT)} from {len(files)} result files")


if __name__ == "__main__":
    main()
