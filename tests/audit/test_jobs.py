"""Book-audit jobs: the results store, resuming (also after SIGKILL), reports, and the demo books end to end."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mia_core import build_frequency_table, load_model
from mia_core.audit.batches import batch_sizes
from mia_core.audit.jobs import AuditSettings, audit_result, plan_audit, run_audit, run_scoring
from mia_core.audit.report import report_html, write_report
from mia_core.audit.report_snippets import snippet_heatmap
from mia_core.audit.sources import Book
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore
from mia_core.scoring import score_texts

from tests.support.cli_runner import run_cli
from tests.support.store_poll import wait_scored
from tests.support.tiny import random_texts

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = AuditSettings(method="min_k_pp", params={"k": 0.2}, snippet_words=20, n_boot=300, batch_snippets=4)


def books_of(texts: list[str], prefix: str, n_books: int, label: int | None = None) -> list[Book]:
    """Group texts into books of consecutive texts."""
    size = len(texts) // n_books
    return [Book(f"{prefix}{i}", "\n".join(texts[i * size:(i + 1) * size]), "test", label) for i in range(n_books)]


@pytest.fixture
def library(membership):
    """Calibration: 2 member + 2 non-member books; audit: 2 member + 2 non-member books (10 texts each)."""
    members, nonmembers = membership["members"], membership["nonmembers"]
    calibration = books_of(members[:20], "cal-m", 2, 1) + books_of(nonmembers[:20], "cal-n", 2, 0)
    audit = books_of(members[20:], "member-", 2) + books_of(nonmembers[20:], "held-out-", 2)
    return membership["lm"], calibration, audit


def test_audit_ranks_member_books_higher_and_scores_equal_direct_scoring(library, tmp_path):
    lm, calibration, audit = library
    store = ResultsStore(tmp_path / "r.duckdb")
    result = run_audit(ModelRef("tiny"), audit, calibration, SETTINGS, store, lm=lm)
    books = result.books.set_index("book")
    member_prev = books.loc[["member-0", "member-1"], "prevalence"].mean()
    held_out_prev = books.loc[["held-out-0", "held-out-1"], "prevalence"].mean()
    assert member_prev > held_out_prev
    assert books.loc[["member-0", "member-1"], "mean_score"].mean() > books.loc[["held-out-0", "held-out-1"], "mean_score"].mean()
    # every stored score is the method's score of that snippet text, computed directly
    snippets = result.snippets
    direct = score_texts(lm, result.texts(snippets["snippet_id"]).tolist(), ["min_k_pp"], k=0.2, long_text="truncate")["min_k_pp"]
    np.testing.assert_allclose(snippets["score"].to_numpy(), direct.to_numpy(), rtol=1e-6)
    assert set(snippets["role"]) == {"calibration", "audit"} and snippets["n_words"].eq(20).all()
    assert result.run["status"] == "done" and result.run["fingerprint"] == lm.fingerprint
    assert result.run["params"] == {"k": 0.2} and result.run["code_version"]


def test_rerun_resumes_without_recomputing(library, tmp_path, monkeypatch):
    lm, calibration, audit = library
    store = ResultsStore(tmp_path / "r.duckdb")
    run_id = plan_audit(store, ModelRef("tiny"), audit, calibration, SETTINGS, lm=lm)
    assert plan_audit(store, ModelRef("tiny"), audit, calibration, SETTINGS, lm=lm) == run_id  # same inputs → same job

    calls = []

    def fail_after_two_batches(*args, **kwargs):
        calls.append(1)
        if len(calls) > 2:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    import mia_core.audit.jobs as jobs
    original = jobs.score_snippets
    monkeypatch.setattr(jobs, "score_snippets", fail_after_two_batches)
    with pytest.raises(KeyboardInterrupt):
        run_scoring(store, run_id, ModelRef.of(lm), lm=lm)
    assert store.progress(run_id)[0] == 2 * SETTINGS.batch_snippets
    assert store.run(run_id)["status"] == "interrupted"
    first = store.results(run_id).dropna(subset=["score"])
    monkeypatch.setattr(jobs, "score_snippets", original)
    computed = run_scoring(store, run_id, ModelRef.of(lm), lm=lm)
    scored, planned = store.progress(run_id)
    assert computed == planned - len(first) and scored == planned
    after = store.results(run_id).set_index("snippet_id")
    pd.testing.assert_series_equal(after.loc[first["snippet_id"], "session"], first.set_index("snippet_id")["session"])
    assert after["session"].nunique() == 2
    with pytest.raises(ValueError, match="not finished"):
        audit_result(store, plan_audit(store, ModelRef("tiny"), audit[:1], calibration, SETTINGS, lm=lm))


def test_analysis_can_be_redone_without_the_model(library, tmp_path):
    lm, calibration, audit = library
    store = ResultsStore(tmp_path / "r.duckdb")
    first = run_audit(ModelRef("tiny"), audit, calibration, SETTINGS, store, lm=lm)
    again = audit_result(store, first.run["run_id"], AuditSettings(**{**SETTINGS.__dict__, "rule": "accuracy"}))
    assert again.calibration.rule == "accuracy"
    with pytest.raises(ValueError, match="scored with"):
        audit_result(store, first.run["run_id"], AuditSettings(**{**SETTINGS.__dict__, "snippet_words": 10}))


def test_report_is_self_contained_and_escapes_book_text(library, tmp_path):
    lm, calibration, audit = library
    evil = Book("<script>alert(1)</script>", audit[0].text.replace("\n", " <b>bold</b>\n", 1), "test")
    result = run_audit(ModelRef("tiny"), [evil, *audit[1:]], calibration, SETTINGS, ResultsStore(tmp_path / "r.duckdb"), lm=lm)
    paths = write_report(result, tmp_path / "out", lm)
    page = paths["report"].read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>bold</b>" not in page
    assert "<script src" not in page and "<link" not in page  # plotly.js is inlined: opens offline
    assert 'id="books-chart"' in page and 'id="calibration-roc"' in page and "Limits of the evidence" in page
    assert "proof" not in page.split("<body>")[1].lower()
    books = pd.read_csv(paths["books"])
    for column in ("book", "n_snippets", "rate", "rate_lo", "rate_hi", "prevalence", "p_adj", "verdict"):
        assert column in books.columns
    assert len(pd.read_csv(paths["snippets"])) == len(result.snippets)
    assert page.count('class="mia-heatmap"') >= 1 and "Top snippets" in page  # token heatmaps of the top book
    assert "mia-heatmap" not in report_html(result)  # without the model: plain (escaped) snippet text


def test_snippet_heatmap_only_for_methods_scored_from_the_statistics(library):
    lm, _, audit = library
    text = audit[0].text[:200]
    heatmap = snippet_heatmap(lm, text, SETTINGS, "top 1")
    assert 'class="mia-heatmap"' in heatmap and 'id="top-1"' in heatmap and "centre 0.00" in heatmap
    for method in ("lowercase", "dc_pdd", "infilling"):  # they need more than the statistics (a CLI run may use them)
        assert snippet_heatmap(lm, text, AuditSettings(method=method, params={}), "top") is None


def write_library(folder: Path, *, audited_books: int = 4, calibration_per_book: int = 20) -> tuple[Path, Path]:
    """A calibration table (4 books of `calibration_per_book` snippets, 2 labelled members) and a table of
    `audited_books` books of 40 snippets to audit, all of 20 words: with `--batch-snippets 1` (a commit a snippet) a
    run of several seconds."""
    n_cal, n_books = 4 * calibration_per_book, 40 * audited_books
    texts = random_texts(n_cal + n_books, seed=11, min_words=20, max_words=20)
    cal = pd.DataFrame({"book": [f"c{i // calibration_per_book}" for i in range(n_cal)], "text": texts[:n_cal],
                        "label": [1 if i < n_cal // 2 else 0 for i in range(n_cal)]})
    books = pd.DataFrame({"book": [f"b{i // 40}" for i in range(n_books)], "text": texts[n_cal:]})
    cal.to_csv(folder / "cal.csv", index=False)
    books.to_csv(folder / "books.csv", index=False)
    return folder / "cal.csv", folder / "books.csv"


def mia(*args, cache: Path, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MIA_LENS_CACHE": str(cache)}
    return subprocess.Popen([sys.executable, "-m", "mia_core", *map(str, args)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(model_dir, tmp_path, monkeypatch):
    cal, books = write_library(tmp_path, audited_books=2, calibration_per_book=10)  # 120 snippets, a commit each
    args = ["audit-books", "--model", model_dir, "--calibration", cal, "--books", books, "--snippet-words", "20",
            "--batch-snippets", "1", "--n-boot", "200"]
    store_path = tmp_path / "killed.duckdb"
    proc = mia(*args, "--output-dir", tmp_path / "killed", "--store", store_path, cache=tmp_path / "cache-a")
    wait_scored(store_path, proc, 20, deadline_s=240)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.communicate()[1][-2000:]}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = ResultsStore(store_path)
    run_id = store.runs()["run_id"].iloc[0]
    before = store.results(run_id).dropna(subset=["score"]).set_index("snippet_id")
    assert 20 <= len(before) < 120

    resumed = mia(*args, "--output-dir", tmp_path / "resumed", "--store", store_path, cache=tmp_path / "cache-a")
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-2000:]
    assert f"{len(before)} already scored (resuming)" in err
    after = store.results(run_id).set_index("snippet_id")
    pd.testing.assert_frame_equal(after.loc[before.index, ["score", "session", "computed_at"]],
                                  before[["score", "session", "computed_at"]])  # nothing stored was recomputed

    # the uninterrupted run: the same command in this process (the two above are processes of their own), own caches
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache-b"))
    code, _, err = run_cli(*args, "--output-dir", tmp_path / "clean", "--store", tmp_path / "clean.duckdb")
    assert code == 0, err[-2000:]
    for name in ("books.csv", "snippets.csv"):
        a, b = pd.read_csv(tmp_path / "resumed" / name), pd.read_csv(tmp_path / "clean" / name)
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9)


def test_cli_bad_inputs_are_clear_and_other_books_go_on(model_dir, tmp_path, monkeypatch):
    cal, _ = write_library(tmp_path, calibration_per_book=10)
    folder = tmp_path / "books"
    folder.mkdir()
    (folder / "good.txt").write_text(" ".join(random_texts(8, seed=2, min_words=20, max_words=20)))
    (folder / "empty.txt").write_text("")
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.7 broken")
    (folder / "corrupt.epub").write_bytes(b"PK\x03\x04 broken")
    (folder / "short.txt").write_text("only five words here today")
    common = ["audit-books", "--model", model_dir, "--snippet-words", "20", "--n-boot", "200",
              "--output-dir", tmp_path / "out", "--store", tmp_path / "r.duckdb"]
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    code, _, err = run_cli(*common, "--calibration", cal, "--books", folder)
    assert code == 0, err[-2000:]
    assert "empty.txt: the file is empty" in err and "corrupt.pdf: not a readable PDF" in err
    assert "corrupt.epub: not a readable EPUB" in err and "short: 5 words, fewer than one 20-word snippet" in err
    assert list(pd.read_csv(tmp_path / "out" / "books.csv")["book"]) == ["good"]
    assert "Books not audited" in (tmp_path / "out" / "report.html").read_text()

    one_class = tmp_path / "one.csv"
    pd.DataFrame({"book": ["a", "b"], "text": ["x " * 30, "y " * 30], "label": [0, 0]}).to_csv(one_class, index=False)
    code, _, err = run_cli(*common, "--calibration", one_class, "--books", folder)
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: ")
    assert "only non-members" in err and "Traceback" not in err


@pytest.mark.integration
def test_demo_books_with_demo_known(tmp_path):
    """Member plays get a higher estimated prevalence than held-out plays; the report opens in Chromium."""
    out = tmp_path / "audit"
    code, _, err = run_cli("audit-books", "--model", "demo-known", "--calibration", "demo-books", "--books", "demo-books",
                           "--output-dir", out, "--snippet-words", "128", "--max-snippets-per-book", "4",
                           "--store", tmp_path / "r.duckdb")  # in this process: torch and the rest already imported
    assert code == 0, err[-3000:]
    from mia_core import datasets

    labels = datasets.load("demo-books").set_index("id")["label"]
    books = pd.read_csv(out / "books.csv")
    books["label"] = books["book"].map(labels)
    assert books.groupby("label")["prevalence"].mean()[1] > books.groupby("label")["prevalence"].mean()[0]
    assert books["verdict"].str.contains("proof").sum() == 0
    open_report_in_chromium(out / "report.html")


def open_report_in_chromium(report: Path) -> None:
    """Load the report from disk in headless Chromium (no network) and check the plotly chart was drawn."""
    import shutil

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("Debian chromium not installed (make test installs it)")
    from playwright.sync_api import sync_playwright

    artifacts = ROOT / "tests" / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1200, "height": 1400}, offline=True)
        page = context.new_page()
        page.goto(report.as_uri())
        page.locator("#books-chart .main-svg").first.wait_for(timeout=60_000)
        assert page.locator("#books-chart .bars path").count() > 0
        assert page.locator("#calibration-roc .scatterlayer").count() == 1
        page.screenshot(path=str(artifacts / "audit_report.png"), full_page=True)
        browser.close()


def test_cli_audits_with_a_frequency_table_method(model_dir, tmp_path, monkeypatch):
    """DC-PDD needs a frequency table: `--freq` carries it into the job (resolved, as Ray workers read it), and the
    snippet scores are DC-PDD's under that table; without `--freq` the command stops before planning a job."""
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    cal, books = write_library(tmp_path)
    lm = load_model(str(model_dir), device="cpu")
    table = build_frequency_table(lm.tokenizer, random_texts(200, seed=5), vocab_size=lm.vocab_width)
    freq = table.save(tmp_path / "freq.npz")
    common = ["audit-books", "--model", model_dir, "--calibration", cal, "--books", books, "--snippet-words", "20",
              "--n-boot", "100", "--method", "dc_pdd", "--max-snippets-per-book", "2", "--store", tmp_path / "r.duckdb"]
    code, _, err = run_cli(*common, "--output-dir", tmp_path / "none")
    assert code == 2 and err.strip() == ("error: dc_pdd needs --freq (a token-frequency table; build one with: mia freq "
                                         "build)")
    assert not (tmp_path / "r.duckdb").exists() or ResultsStore(tmp_path / "r.duckdb").runs().empty
    code, _, err = run_cli(*common, "--freq", freq, "--param", "a=0.05", "--output-dir", tmp_path / "out")
    assert code == 0, err
    snippets = pd.read_csv(tmp_path / "out" / "snippets.csv")
    texts = snippets["text"].tolist()[:4]
    expected = score_texts(lm, texts, ["dc_pdd"], bos="auto", long_text="truncate", freq=table, a=0.05)["dc_pdd"]
    np.testing.assert_allclose(snippets["score"].to_numpy()[:4], expected.to_numpy(), rtol=1e-9)
    code, _, err = run_cli(*common[:-2], "--method", "min_k", "--freq", freq, "--output-dir", tmp_path / "x")
    assert code == 2 and err.strip() == "error: --freq is used by none of the chosen methods (it is for dc_pdd)"


def test_the_runs_table_counts_the_stored_scores_while_a_run_is_scored(library, tmp_path):
    # reproduces "0 of 36 scored" beside n_scored 16: the message written when scoring started stood unchanged
    lm, calibration, audit = library
    store = ResultsStore(tmp_path / "r.duckdb")
    run_id = plan_audit(store, ModelRef("tiny"), audit, calibration, SETTINGS, lm=lm)
    seen = []

    def progress(done: int, total: int) -> None:
        row = store.runs().set_index("run_id").loc[run_id]
        seen.append((done, total, row["status"], int(row["n_scored"]), row["message"]))

    run_scoring(store, run_id, ModelRef.of(lm), lm=lm, progress=progress)
    planned = store.progress(run_id)[1]
    assert len(seen) == -(-planned // SETTINGS.batch_snippets) > 2
    for done, total, status, n_scored, message in seen:
        assert (status, n_scored, total) == ("running", done, planned)
        assert message == f"{done} of {planned} snippets scored"


def test_a_small_first_batch_then_batches_double_to_the_normal_size(library, tmp_path):
    lm, calibration, audit = library
    store = ResultsStore(tmp_path / "r.duckdb")
    run_id = plan_audit(store, ModelRef("tiny"), audit, calibration, SETTINGS, lm=lm)
    done = []
    run_scoring(store, run_id, ModelRef.of(lm), lm=lm, progress=lambda d, t: done.append(d), first_batch=1)
    planned = store.progress(run_id)[1]
    sizes = [1, 2] + [4] * planned  # batch_snippets=4: 1, 2, then 4 each
    expected = [min(sum(sizes[:i + 1]), planned) for i in range(len(sizes))]
    assert done == expected[:expected.index(planned) + 1]
    assert store.results(run_id)["score"].notna().sum() == planned
    with pytest.raises(ValueError, match="at least 1"):
        next(batch_sizes(0, 4))
