"""The report's provenance: each book's SHA-256 as audited, and a command that repeats the run (and nothing else)."""
from __future__ import annotations

import hashlib
import html
import re
import shlex
from pathlib import Path

import pandas as pd

from mia_core.audit.jobs import audit_result
from mia_core.audit.provenance import book_digests
from mia_core.runs.store import ResultsStore

from tests.audit.test_jobs import write_library
from tests.support.cli_runner import run_cli


def test_provenance_hashes_the_audited_text_and_its_command_repeats_only_this_run(tmp_path, model_dir):
    cal, books = write_library(tmp_path)
    store = tmp_path / "r.duckdb"
    common = ["--model", model_dir, "--snippet-words", "20", "--max-snippets-per-book", "3", "--n-boot", "100",
              "--store", store]
    code, _, err = run_cli("audit-books", "--calibration", cal, "--books", books, "--output-dir", tmp_path / "a", *common)
    assert code == 0, err
    run_id = ResultsStore(store).runs()["run_id"].iloc[0]
    result = audit_result(ResultsStore(store), run_id)
    digests = book_digests(result).set_index(["role", "book"])
    texts = ResultsStore(store).results(run_id, with_texts=True)  # one query, not the report's chunks
    for (role, book), rows in texts.groupby(["role", "book"]):
        expected = hashlib.sha256("".join(t + "\n" for t in rows.sort_values("position")["text"]).encode()).hexdigest()
        shown_role = "audited" if role == "audit" else "calibration"
        assert digests.loc[(shown_role, book), "sha256"] == expected
        assert digests.loc[(shown_role, book), "snippets"] == len(rows) <= 3  # the cap, as audited
    assert len(digests) == texts.groupby(["role", "book"]).ngroups == 8
    labels = texts.groupby(["role", "book"])["label"].first()
    for (role, book), label in labels.items():  # words, never a None or NaN in the table
        shown = digests.loc[("audited" if role == "audit" else "calibration", book), "label"]
        assert shown == ("" if pd.isna(label) else {1: "known member", 0: "known non-member"}[int(label)])

    report = (tmp_path / "a" / "report.html").read_text()
    assert "<h2>Provenance</h2>" in report and digests["sha256"].iloc[0] in report
    command = html.unescape(re.search(r"<td>repeat with</td><td>(.*?)</td>", report).group(1))
    args = shlex.split(command)  # exactly as written: the sources, the store and an output folder named by the run
    assert args[:2] == ["mia", "audit-books"] and f"--job-id {run_id}" in command and "--max-snippets-per-book 3" in command
    given = {a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("--")}
    assert given["--calibration"] == str(Path(cal).resolve()) and given["--books"] == str(Path(books).resolve())
    assert given["--store"] == str(store) and given["--output-dir"] == f"audit-{run_id}"
    args[args.index("--output-dir") + 1] = str(tmp_path / "b")  # here, not in the folder the tests run from
    code, _, err = run_cli(*args[1:])
    assert code == 0, err
    assert "already scored (resuming)" in err  # the same run: nothing scored again
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "a" / "books.csv"), pd.read_csv(tmp_path / "b" / "books.csv"))
    changed = pd.read_csv(books)
    changed.loc[0, "text"] = "an edited line " + changed.loc[0, "text"]
    changed.to_csv(tmp_path / "changed.csv", index=False)
    i = args.index("--books")
    code, _, err = run_cli(*args[1:i + 1], tmp_path / "changed.csv", *args[i + 2:])
    assert code == 2 and "exists with another plan" in err  # the command cannot silently audit other texts
