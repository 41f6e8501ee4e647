"""docs/performance.md is generated from bench/results/*.json: it cannot drift, every result carries its envelope."""
from __future__ import annotations

import datetime
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("performance_page", ROOT / "bench" / "performance_page.py")
page = sys.modules["performance_page"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(page)
REGENERATE = "run `python bench/performance_page.py` and commit docs/performance.md"
RESULTS = page.read_results()


def test_committed_page_is_what_the_script_writes():
    """The page on disk equals the page rendered from the result files now."""
    assert page.PAGE.read_text() == page.render(RESULTS), f"docs/performance.md is stale: {REGENERATE}"


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_every_result_file_has_the_envelope(name):
    """benchmark, date, commit, machine, command, load and results present; an ISO date; a null field explained."""
    data = RESULTS[name]
    assert page.missing_fields(data) == [], f"{name} lacks {page.missing_fields(data)}"
    assert isinstance(data["benchmark"], str) and data["benchmark"]
    if data["date"] is not None:
        datetime.datetime.fromisoformat(data["date"])
    nulls = [field for field in page.FIELDS if data[field] is None]
    assert not nulls or data.get("note"), f"{name}: {nulls} null without a note saying why"


def result(date: str, figure: float, case: str = "llama-1b/wikimia-like") -> dict:
    """A hand-made result of one benchmark on one machine."""
    return {"benchmark": "gpu-throughput", "date": date, "commit": "abc1234", "machine": "one test GPU, 2 cores",
            "command": "python3 bench/gpu.py --parts throughput", "load": "load average 0.10, 0.20, 0.30",
            "results": {case: {"tokens": 100, "s_over_c_time": figure}}}


def test_only_the_later_of_two_results_is_shown():
    """Two results of one benchmark on one machine: the later date's figure is in the table, the earlier only listed."""
    text = page.render({"early.json": result("2026-01-01", 1.987), "late.json": result("2026-02-01", 1.123)})
    rows = [line for line in text.splitlines() if line.startswith("| llama-1b")]
    assert len(rows) == 1 and "1.123" in rows[0] and "late.json" in rows[0]
    assert "1.987" not in text
    earlier = text.split("Earlier and comparison runs:")[1]
    assert "[early.json](results/early.json)" in earlier and "2026-01-01" in earlier


def test_cells_cannot_break_a_table():
    """A pipe in a case name is escaped: every row of the table has as many cells as its header."""
    text = page.render({"x.json": result("2026-01-01", 1.5, case="a | b")})
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert "a \\| b" in table[2]
    widths = {len(line.replace("\\|", "").split("|")) for line in table}
    assert len(widths) == 1


def test_rendering_is_deterministic():
    """The same files in another order give the same page."""
    assert page.render(dict(reversed(list(RESULTS.items())))) == page.render(RESULTS)


def test_written_envelope_has_every_field(tmp_path):
    """bench/envelope.py's writer produces a file the page accepts."""
    from envelope import write_result  # bench/ is on sys.path once performance_page is loaded

    path = write_result(tmp_path / "r.json", "cli-startup", {"mia --help": {"seconds": 0.5}})
    data = json.loads(path.read_text())
    assert page.missing_fields(data) == []
    datetime.datetime.fromisoformat(data["date"])
    assert "mia --help" in page.render({"r.json": data})
