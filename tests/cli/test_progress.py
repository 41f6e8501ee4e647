"""Progress off a terminal: plain lines about every 10% with an ETA, and none of the libraries' own bars or warnings."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

from mia_core.cli.progress import PlainProgress, clock, progress_bar
from mia_core.cli.quiet import QUIET_ENVIRONMENT

from tests.support.tiny import random_texts


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_issue_example_line_and_the_clock():
    out, now = io.StringIO(), FakeClock()
    progress = PlainProgress("scored", "texts", out, now)
    now.t = 41.0
    progress(120, 1200)
    # 41 s for 120 texts → 1,080 left take 41 × 1080 / 120 = 369 s = 6:09
    assert out.getvalue() == "scored: 120/1,200 texts (10%), 0:41 elapsed, ETA 6:09\n"
    assert [clock(s) for s in (0, 41, 369, 3599.6, 3723)] == ["0:00", "0:41", "6:09", "1:00:00", "1:02:03"]


def test_one_line_per_tenth_a_new_pass_restarts_and_a_resumed_job_counts_only_this_run():
    out, now = io.StringIO(), FakeClock()
    progress = PlainProgress("scoring", "tokens", out, now)
    for done in range(0, 1001, 7):  # 143 calls, 7 tokens a second
        now.t = done / 7
        progress(done, 1000)
    now.t = 143.0
    progress(1000, 1000)
    lines = out.getvalue().splitlines()
    assert len(lines) == 10  # the first call past 100, 200, …, 1000
    counts = [int(line.split()[1].split("/")[0].replace(",", "")) for line in lines]
    assert counts == [105, 203, 301, 406, 504, 602, 700, 805, 903, 1000]
    # ETA = elapsed × left / done: at 105 tokens after 15 s, 15 × 895 / 105 = 127.9 s → 2:08
    assert lines[0] == "scoring: 105/1,000 tokens (10%), 0:15 elapsed, ETA 2:08"
    assert lines[-1] == "scoring: 1,000/1,000 tokens (100%), 2:23 elapsed"

    now.t = 200.0  # a method's second pass: a new total, a new clock
    progress(50, 100)
    assert out.getvalue().splitlines()[-1] == "scoring: 50/100 tokens (50%), 0:00 elapsed, ETA 0:00"

    out, now = io.StringIO(), FakeClock()
    resumed = PlainProgress("snippets", "snippets", out, now, done=600, total=1200)
    now.t = 29.0
    resumed(660, 1200)  # 55%: no tenth crossed since the resume, and under EVERY_S
    now.t = 60.0
    resumed(720, 1200)  # 120 snippets in 60 s → 480 left take 240 s
    assert out.getvalue() == "snippets: 720/1,200 snippets (60%), 1:00 elapsed, ETA 4:00\n"


def test_a_slow_pass_writes_a_line_every_30_seconds_between_tenths():
    """One long text at 161 tokens/s: a tenth of 1M tokens is 10 minutes, which used to pass without a line."""
    out, now = io.StringIO(), FakeClock()
    progress = PlainProgress("scoring", "tokens", out, now)
    for second in range(0, 125, 5):  # a batch every 5 s; 2,000 tokens each: under 1% of the pass
        now.t = float(second)
        progress(second * 400, 1_000_000)
    now.t = 200.0
    progress(48_000, 1_000_000)  # nothing advanced since the last line: none, however long the wait
    lines = out.getvalue().splitlines()
    assert [line.split(" tokens")[0] for line in lines] == ["scoring: 12,000/1,000,000", "scoring: 24,000/1,000,000",
                                                           "scoring: 36,000/1,000,000", "scoring: 48,000/1,000,000"]
    assert lines[0] == "scoring: 12,000/1,000,000 tokens (1%), 0:30 elapsed, ETA 41:10"  # 30 × 988,000 / 12,000 s
    now.t = 260.0
    progress(100_000, 1_000_000)  # the tenth crossed: a line at once
    assert out.getvalue().splitlines()[-1].startswith("scoring: 100,000/1,000,000 tokens (10%), 4:20 elapsed")


def test_percent_only_scale_and_the_bar_on_a_terminal():
    out, now = io.StringIO(), FakeClock()
    progress = PlainProgress("chunks", None, out, now)
    now.t = 10.0
    progress(500, 1000, note="pass 2")
    assert out.getvalue() == "chunks: 50%, 0:10 elapsed, ETA 0:10, pass 2\n"

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert isinstance(progress_bar("x", stream=io.StringIO()), PlainProgress)
    terminal = Terminal()
    bar = progress_bar("scoring", stream=terminal)
    assert not isinstance(bar, PlainProgress)
    bar(5, 10)
    assert "\r" in terminal.getvalue() and "5/10" in terminal.getvalue()


def test_a_redirected_run_prints_plain_progress_and_no_library_noise(model_dir, tmp_path):
    src = tmp_path / "texts.jsonl"
    src.write_text("\n".join(json.dumps({"text": t}) for t in random_texts(20, seed=4, max_words=12)))
    env = {k: v for k, v in os.environ.items() if k not in QUIET_ENVIRONMENT}  # the command must quiet them itself
    env["MIA_LENS_CACHE"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-m", "mia_core", "audit-online", "--model", str(model_dir), "--input",
                           str(src), "--output", str(tmp_path / "w.csv"), "--window", "8"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "\r" not in err
    assert "Loading" not in err and "Warning" not in err, err  # no "Loading weights" bar, no FutureWarning/UserWarning
    lines = [line for line in err.splitlines() if line.startswith("scoring: ")]
    counts = [int(line.split()[1].split("/")[0]) for line in lines]
    assert counts == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]  # one text a step: a line each tenth
    assert all(", ETA " in line for line in lines[:-1]) and lines[-1].startswith("scoring: 20/20 texts (100%)")
    others = [line for line in err.splitlines() if line not in lines]
    assert others[0] == f"loading model {model_dir} …" and len(others) == 2 and others[1].startswith("wrote ")
