"""The Benchmark page with the tiny model: kept runs overlaid and compared (AUROC [95% CI], paired tests), method
labels everywhere, column pickers filled from an upload, the downloads (metrics JSON fields, scores with their texts),
palette histograms, blank unresolvable TPR cells, rates as percentages and the sample size kept across data
sources."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

from mia_core import METHODS, datasets
from mia_core.palette import MEMBER, NONMEMBER

pytestmark = pytest.mark.integration


def chart(at, key: str) -> dict:
    """The plotly figure drawn with widget key `key`."""
    found = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if key in c.proto.id]
    assert len(found) == 1, [c.proto.id for c in at.get("plotly_chart")]
    return found[0]


def table_with(at, column: str) -> pd.DataFrame:
    """The one table on the page with a column named `column` (read-only tables carry no key in AppTest)."""
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


@pytest.fixture
def downloads(monkeypatch) -> dict[str, bytes]:
    """The bytes of every download button drawn, by file name (captured where Streamlit stores them)."""
    saved: dict[str, bytes] = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def keep(self, path_or_data, mimetype, kind, filename=None):
        saved[filename] = path_or_data if isinstance(path_or_data, bytes) else path_or_data.encode()
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    return saved


def test_two_runs_are_kept_overlaid_and_set_side_by_side(tiny_app):
    """Same texts, k per method and then one k = 0.5: both runs are kept with their labels, the overlay has a curve
    per run and method (AUROCs as sklearn gives them), and the side-by-side table holds both runs' values."""
    at = tiny_app("app_pages/benchmark.py")
    at.number_input(key="bench_n").set_value(6).run()
    at.multiselect(key="bench_methods").set_value(["loss", "min_k"]).run()
    at.button(key="bench_run").click().run()
    at.toggle(key="bench_k_same").set_value(True).run()
    at.slider(key="bench_k").set_value(0.5).run()
    at.button(key="bench_run").click().run()
    assert not at.exception, at.exception
    runs = at.session_state["bench_runs"]
    assert [r["number"] for r in runs] == [1, 2]
    model = Path(at.session_state["model_spec"]).name  # a local folder: its name, not its server path
    assert runs[0]["label"] == f"#1 {model} · demo-wiki · n 12 · k per method"
    assert runs[1]["label"] == f"#2 {model} · demo-wiki · n 12 · k 0.5"
    np.testing.assert_allclose(runs[0]["scores"]["loss"], runs[1]["scores"]["loss"])  # same texts, same loss
    assert not np.allclose(runs[0]["scores"]["min_k"], runs[1]["scores"]["min_k"])  # k changed Min-K%
    assert at.multiselect(key="bench_compare").value == [1, 2]
    overlay = chart(at, "bench_compare_roc")
    curves = [t for t in overlay["data"] if t["name"] != "chance"]
    assert len(curves) == 4
    for run in runs:
        labels = run["data"]["label"].to_numpy()
        for method in ("loss", "min_k"):
            name = f"{run['label']} — {METHODS[method].label}"
            trace = next(t for t in curves if t["name"].startswith(name))
            expected = roc_auc_score(labels, run["scores"][method])
            assert trace["name"].endswith(f"(AUROC {expected:.3f})")
    colours = {t["legendgroup"]: set() for t in curves}
    for t in curves:
        colours[t["legendgroup"]].add(t["line"]["color"])
    assert all(len(c) == 1 for c in colours.values()) and len(set.union(*colours.values())) == 2  # a colour per run
    assert {t["line"]["dash"] for t in curves} == {"solid", "dash"}  # a dash per method
    assert not {t["line"]["color"] for t in curves} & {MEMBER, NONMEMBER}  # red and blue keep their meaning
    table = table_with(at, runs[1]["label"])
    assert list(table.columns) == ["method", runs[0]["label"], runs[1]["label"]]
    assert list(table["method"]) == [METHODS["loss"].label, METHODS["min_k"].label, "blind baseline (no model)"]
    for run in runs:  # "AUROC [95% CI]" text: sklearn's AUROC, the run's own bootstrap interval
        labels = run["data"]["label"].to_numpy()
        for cell, method in zip(table[run["label"]], ("loss", "min_k")):
            lo, hi = run["report"][method]["auroc_ci"]
            assert cell == f"{roc_auc_score(labels, run['scores'][method]):.3f} [{lo:.3f}, {hi:.3f}]"
    assert any("#1 and #2 share 12 texts (6 members, 6 non-members): too few for a paired test" in c.value
               for c in at.get("code"))
    at.selectbox(key="bench_compare_metric").set_value("TPR@1%FPR").run()  # 6 non-members cannot resolve 1%
    assert (table_with(at, runs[1]["label"])[runs[1]["label"]].fillna("") == "").all()  # blank cells
    assert [c.value for c in at.caption if c.value.startswith("#") and "Blank TPR cells" in c.value] == [
        f"{r['label']}: Blank TPR cells: this run has 6 non-members; TPR@1%FPR needs ≥ 100 (with fewer, a single "
        "false positive is already above that rate, so no threshold reaches it)." for r in runs]


def test_labels_colours_blank_cells_and_the_blind_warning_on_a_small_run(tiny_app):
    """Method labels in the metrics table, distribution menu, buckets and ROC legend; palette histograms; TPR
    cells blank with 6 non-members (5% needs 20); a warning that the blind baseline itself is uncertain."""
    at = tiny_app("app_pages/benchmark.py")
    at.number_input(key="bench_n").set_value(6).run()
    at.multiselect(key="bench_methods").set_value(["loss", "min_k_pp"]).run()
    at.button(key="bench_run").click().run()
    assert not at.exception, at.exception
    labels = [METHODS["loss"].label, METHODS["min_k_pp"].label]
    table = table_with(at, "FPR@95%TPR")
    assert list(table["method"]) == labels
    assert (table[["TPR@5%FPR", "TPR@1%FPR", "TPR@0.1%FPR"]] == "").all().all()  # text cells: blank, never "None"
    assert table["FPR@95%TPR"].notna().all()
    assert any("6 non-members" in c.value and "TPR@5%FPR needs ≥ 20" in c.value and "≥ 1,000" in c.value
               for c in at.caption)
    assert any("blind baseline itself is uncertain" in w.value for w in at.warning)
    assert at.selectbox(key="bench_dist").options == labels
    assert set(labels) <= set(table_with(at, "words").columns)
    roc = chart(at, "bench_roc")
    assert [t["name"].split(" (AUROC")[0] for t in roc["data"]] == [*labels, "chance"]
    hist = chart(at, "bench_hist")
    assert hist["layout"]["barmode"] == "overlay"
    assert [(t["name"], t["marker"]["color"]) for t in hist["data"]] == [
        ("members (label 1)", "rgba(178,24,43,0.55)"), ("non-members (label 0)", "rgba(33,102,172,0.55)")]
    assert MEMBER == "#b2182b" and NONMEMBER == "#2166ac"  # the rgba above are these two, hand-converted


def test_sample_size_survives_switching_the_data_source(tiny_app):
    at = tiny_app("app_pages/benchmark.py")
    at.number_input(key="bench_n").set_value(15).run()
    at.radio(key="bench_source").set_value("Upload CSV/JSONL").run()
    at.radio(key="bench_source").set_value("Built-in demo set").run()
    assert not at.exception and at.number_input(key="bench_n").value == 15


def upload_bytes() -> tuple[bytes, pd.DataFrame]:
    """A CSV with its own column names (passage, is_member, note), one text a spreadsheet would run as a formula."""
    data = datasets.sample_per_class(datasets.load("demo-wiki"), 4).reset_index(drop=True)
    frame = pd.DataFrame({"passage": data["text"], "is_member": data["label"], "note": ["x"] * len(data)})
    frame.loc[0, "passage"] = "=1+1 " + frame.loc[0, "passage"]
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    return buffer.getvalue().encode(), frame


def test_pickers_follow_a_new_file_and_default_to_text_and_label(tiny_app):
    """A second file with `label` and `text` columns (in that order) gets them picked, whatever the first file had."""
    content, _ = upload_bytes()
    at = tiny_app("app_pages/benchmark.py")
    at.radio(key="bench_source").set_value("Upload CSV/JSONL").run()
    at.file_uploader(key="bench_upload").set_value(("mine.csv", content, "text/csv")).run()
    other = b"label,id,text\n1,a,first text here\n0,b,second text here\n"
    at.file_uploader(key="bench_upload").set_value(("other.csv", other, "text/csv")).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="bench_text_col").options == ["label", "id", "text"]
    assert (at.selectbox(key="bench_text_col").value, at.selectbox(key="bench_label_col").value) == ("text", "label")
    assert not at.error


def test_upload_column_pickers_and_the_downloads(tiny_app, downloads):
    """The pickers list the file's columns (no text/label: first column, then the next one); a bad label column is
    an error naming the file only; the run's metrics JSON and scores CSV carry what the brief asks."""
    content, frame = upload_bytes()
    at = tiny_app("app_pages/benchmark.py")
    at.radio(key="bench_source").set_value("Upload CSV/JSONL").run()
    at.file_uploader(key="bench_upload").set_value(("mine.csv", content, "text/csv")).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="bench_text_col").options == ["passage", "is_member", "note"]
    assert at.selectbox(key="bench_text_col").value == "passage"
    assert at.selectbox(key="bench_label_col").value == "is_member"
    at.selectbox(key="bench_label_col").set_value("note").run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "mine.csv" in errors[0] and "'note' must be 0 or 1" in errors[0]
    assert "/" not in errors[0].split("mine.csv")[0] and "--" not in errors[0]  # no server folder, no CLI flag
    at.selectbox(key="bench_label_col").set_value("is_member").run()
    at.multiselect(key="bench_methods").set_value(["loss", "min_k"]).run()
    at.button(key="bench_run").click().run()
    assert not at.exception, at.exception
    names = {n.rsplit("_", 1)[-1]: n for n in downloads}  # named by run: run1_<model>_mine.csv_<day>_metrics.json
    assert re.fullmatch(r"run1_[A-Za-z0-9._-]+_mine\.csv_\d{4}-\d\d-\d\d_metrics\.json", names["metrics.json"])
    assert names["scores.csv"] == names["metrics.json"].replace("_metrics.json", "_scores.csv")
    downloads = {short: downloads[name] for short, name in names.items()}
    metrics = json.loads(downloads["metrics.json"])
    run = metrics["run"]
    assert run["spec"] == at.session_state["model_spec"] and len(run["fingerprint"]) >= 8
    assert run["dataset"] == {"name": "mine.csv", "n_texts": 8, "n_members": 4, "n_nonmembers": 4, "per_class": None,
                              "text_column": "passage", "label_column": "is_member"}
    assert run["k"] is None and run["seed"] == 0 and run["methods"] == ["loss", "min_k"]
    assert run["method_labels"] == {"loss": METHODS["loss"].label, "min_k": METHODS["min_k"].label}
    assert run["command"].startswith("mia eval --model ") and "--input mine.csv" in run["command"]
    assert "--text-column passage --label-column is_member" in run["command"]
    labels = frame["is_member"].to_numpy()
    assert metrics["loss"]["auroc"] == pytest.approx(roc_auc_score(labels, pd.read_csv(
        io.BytesIO(downloads["scores.csv"]))["loss"]), abs=1e-12)
    lo, hi = metrics["blind_baseline_ci"]
    assert lo <= metrics["blind_baseline"]["auroc"] <= hi
    scores = pd.read_csv(io.BytesIO(downloads["scores.csv"]), keep_default_na=False)
    assert scores["text"].tolist() == ["'" + frame["passage"][0], *frame["passage"][1:]]  # formula neutralised
    assert scores["label"].tolist() == labels.tolist() and {"loss", "min_k"} <= set(scores.columns)


def run_twice(tiny_app, first_n: int, second_n: int):
    """Loss and Min-K% on `first_n` demo texts per class with k per method, then on `second_n` with k = 0.5."""
    at = tiny_app("app_pages/benchmark.py")
    at.number_input(key="bench_n").set_value(first_n).run()
    at.multiselect(key="bench_methods").set_value(["loss", "min_k"]).run()
    at.button(key="bench_run").click().run()
    at.number_input(key="bench_n").set_value(second_n).run()
    at.toggle(key="bench_k_same").set_value(True).run()
    at.slider(key="bench_k").set_value(0.5).run()
    at.button(key="bench_run").click().run()
    assert not at.exception, at.exception
    return at, at.session_state["bench_runs"]


def shared_delta(runs: list[dict], method: str) -> tuple[float, int]:
    """ΔAUROC (#2 − #1) recomputed with scikit-learn on the texts both runs scored, and how many they are."""
    first = dict(zip(runs[0]["data"]["text"], runs[0]["scores"][method]))
    rows = [(label, first[text], score) for text, label, score in
            zip(runs[1]["data"]["text"], runs[1]["data"]["label"], runs[1]["scores"][method]) if text in first]
    labels, a, b = (np.array(column) for column in zip(*rows))
    return roc_auc_score(labels, b) - roc_auc_score(labels, a), len(rows)


def test_runs_on_the_same_texts_get_a_paired_test_in_words(tiny_app):
    """12 texts per class twice: the same 24 texts, so loss (unchanged by k) differs by exactly 0 with p = 1, and
    Min-K% by what scikit-learn gives on those texts."""
    at, runs = run_twice(tiny_app, 12, 12)
    blocks = [c.value for c in at.get("code") if "ΔAUROC" in c.value]
    assert len(blocks) == 1
    lines = blocks[0].splitlines()
    assert lines[:3] == [runs[0]["label"], runs[1]["label"], "#1 and #2 scored the same 24 texts (12 members, 12 "
                         "non-members): compared text by text."]
    assert lines[3].startswith(f"{METHODS['loss'].label}: ΔAUROC (#2 − #1) = 0.000 [0.000, 0.000], DeLong p = 1, on "
                               "24 shared texts; paired bootstrap 95% CI [0.000, 0.000] (1,000 resamples, seed 0")
    delta, n = shared_delta(runs, "min_k")
    assert n == 24 and lines[4].startswith(f"{METHODS['min_k'].label}: ΔAUROC (#2 − #1) = {delta:.3f} [")
    assert ", DeLong p " in lines[4] and "on 24 shared texts; paired bootstrap 95% CI [" in lines[4]


def test_partly_shared_texts_are_counted_and_compared_on_those_only(tiny_app):
    """12 and then 15 texts per class: the seeded sample of 12 lies within that of 15, so 24 texts are shared."""
    at, runs = run_twice(tiny_app, 12, 15)
    block = next(c.value for c in at.get("code") if "ΔAUROC" in c.value)
    assert ("#1 and #2 share 24 texts (12 members, 12 non-members) of their 24 and 30: compared on the shared texts "
            "only.") in block
    delta, n = shared_delta(runs, "min_k")
    assert n == 24 and f"{METHODS['min_k'].label}: ΔAUROC (#2 − #1) = {delta:.3f} [" in block


def test_rates_are_percentages_on_every_benchmark_table(tiny_app):
    """With 25 non-members TPR@5%FPR resolves: "n.n%" cells, as is FPR@95%TPR; AUROCs stay three decimals."""
    at = tiny_app("app_pages/benchmark.py")
    at.number_input(key="bench_n").set_value(25).run()
    at.multiselect(key="bench_methods").set_value(["loss"]).run()
    at.button(key="bench_run").click().run()
    assert not at.exception, at.exception
    run = at.session_state["bench_runs"][-1]
    table = table_with(at, "FPR@95%TPR")
    tpr = run["report"]["loss"]["tpr@5%fpr"]
    assert table["TPR@5%FPR"].tolist() == [f"{100 * tpr:.1f}%"] and re.fullmatch(r"\d+\.\d%", table["FPR@95%TPR"][0])
    assert table["TPR@1%FPR"].tolist() == [""]  # 25 < 100 non-members
