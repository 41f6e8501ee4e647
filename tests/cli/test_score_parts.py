"""`mia score` reads and scores a large input a part at a time (issue 45, item 11): 10⁶ JSONL rows reached 3.6 GB
before the first text was scored, as the rows, their texts and every text's tokens were held at once. A child process
runs the command and reports its peak (VmHWM, as in tests/audit/test_table_book_memory.py) when scoring starts; the
parts write the bytes one part writes."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from mia_core.cli import score as score_command
from mia_core.model import language_model

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts

#: Rows of the input: 100,000 short texts (8 MB of JSONL), about six parts.
ROWS = 100_000
#: Peak growth allowed until the first batch is scored: torch and the model (~130 MB) and one part's rows and tokens
#: (~90 MB), 222 MB measured. Before: 475 MB (the rows, their texts and all their tokens: ~3.5 KB a row).
GROWTH_MB = 330

CHILD = textwrap.dedent(r"""
    import json, os, re, sys
    from mia_core.cli import main, score
    def mib(field):
        return int(re.search(field + r":\s+(\d+) kB", open("/proc/self/status").read())[1]) / 1024
    def first_call(*args, **kwargs):  # the command's progress: the first call comes when the first batch is back
        def report(*args, **kwargs):
            print(json.dumps({"growth_mib": mib("VmHWM") - before}), flush=True)
            os._exit(0)
        return report
    score.progress_bar = first_call
    before = mib("VmRSS")
    sys.argv = ["mia", "score", "--model", sys.argv[1], "--input", sys.argv[2], "--output", sys.argv[3],
                "--methods", "loss,min_k"]
    main()
""")


def write_rows(path, n: int) -> None:
    texts = random_texts(1000, seed=1, min_words=3, max_words=12)
    with path.open("w") as out:
        for i in range(n):
            out.write(json.dumps({"id": f"r{i}", "text": f"{texts[i % len(texts)]} {i}"}) + "\n")


def test_scoring_starts_after_one_part_is_read_not_the_whole_input(model_dir, tmp_path):
    path = tmp_path / "rows.jsonl"
    write_rows(path, ROWS)
    done = subprocess.run([sys.executable, "-c", CHILD, str(model_dir), str(path), str(tmp_path / "s.csv")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    growth = json.loads(done.stdout.strip().splitlines()[-1])["growth_mib"]
    assert growth < GROWTH_MB, growth


@pytest.mark.parametrize("methods", ["loss,min_k_pp", "loss,grad_norm"])
def test_mia_score_in_parts_writes_the_bytes_of_one_part(model_dir, tmp_path, monkeypatch, methods):
    monkeypatch.setattr(language_model, "CPU_BATCH_TOKENS", 1)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", "text": t}) + "\n"
                           for i, t in enumerate(random_texts(20, seed=24))))
    written = {}
    for name, part_texts in (("one", 1000), ("parts", 7)):
        monkeypatch.setattr(score_command, "PART_TEXTS", part_texts)
        monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / f"cache-{name}"))
        code, _, err = run_cli("score", "--model", model_dir, "--input", src, "--output", tmp_path / f"{name}.csv",
                               "--methods", methods)
        assert code == 0, err
        written[name] = ((tmp_path / f"{name}.csv").read_bytes(), err)
    assert written["parts"][0] == written["one"][0]
    assert pd.read_csv(tmp_path / "parts.csv")["id"].tolist() == [f"r{i}" for i in range(20)]
    in_texts = "/20 texts" in written["parts"][1]  # parts count texts; one part counts tokens, as before
    assert in_texts == (methods == "loss,min_k_pp") and "tokens" in written["one"][1]
