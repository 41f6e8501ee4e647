"""`mia score` on a chat API: SimMIA* through the loopback API, its scores those `mia verify` recomputes from the
record, and the log-prob methods refused in one line."""
from __future__ import annotations

import re

import pandas as pd

from mia_core.runs.api_results import stored_results
from mia_core.runs.store import ResultsStore

from tests.support.cli_runner import run_cli
from tests.support.fake_chat import FakeChat

MEMBER = "the quick brown fox jumps over the lazy dog near the river bank"


def next_word(source: str, max_tokens: int) -> str:
    """The loopback model knows MEMBER: after any of its prefixes it answers MEMBER's next word, else "the"."""
    if "Text so far" not in source:
        return "ready"
    words = source.split('"', 1)[1].rsplit('"', 1)[0].split()
    known = MEMBER.split()
    for n in range(len(known) - 1, 0, -1):
        if words[-n:] == known[:n]:
            return known[n]
    return "the"


def test_mia_score_runs_simmia_star_through_a_chat_api_with_a_record(tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_STORE", str(tmp_path / "store.duckdb"))
    (tmp_path / "in.csv").write_text(f"id,text\nm,{MEMBER}\nn,a slow green turtle sat under the old stone bridge\n")
    (tmp_path / "shots.csv").write_text("id,text\ns1,an unrelated sentence about weather\n")
    with FakeChat("unused") as api:
        api.reply = next_word
        code, out, err = run_cli("score", "--model", api.spec(), "--input", tmp_path / "in.csv", "--output",
                                 tmp_path / "out.csv", "--methods", "simmia_star", "--shots-nonmembers",
                                 tmp_path / "shots.csv", "--param", "n_samples=2", "--param", "n_shots=1")
    assert code == 0, err
    scores = pd.read_csv(tmp_path / "out.csv").set_index("id")["simmia_star"]
    run_id = re.search(r"run (\S+), head", err).group(1)
    code, out, verify_err = run_cli("verify", run_id)
    assert code == 0 and out.startswith("verified: ")
    stored = stored_results(ResultsStore(), run_id)
    assert sorted(r["simmia_star_score"] for r in stored.values()) == sorted(scores.tolist())


def test_a_log_prob_method_on_a_chat_api_is_refused_in_one_line(tmp_path):
    (tmp_path / "in.csv").write_text("id,text\na,some text\n")
    code, out, err = run_cli("score", "--model", "http://127.0.0.1:9/v1?api=chat&model=x", "--input",
                             tmp_path / "in.csv", "--output", tmp_path / "out.csv", "--methods", "loss")
    assert code == 2 and "loss cannot run on it" in err and len(err.strip().splitlines()) == 1
