"""The Book audit's "Dataset inference" section: a finished run's snippets tested per book and as one set.

Suspects are the audited books' snippets; the validation set is the run's non-member calibration
books cut the same way (or uploaded books of the same kind, cut with the run's snippet size). The
false-positive check splits the validation snippets into two halves of whole books when it can (so
a difference between books alone shows up as a rejection) and is shown with every result.
"""
from __future__ import annotations

from dataclasses import asdict

import pandas as pd
import streamlit as st

from mia_core.audit.jobs import AuditSettings
from mia_core.audit.snippets import book_snippets
from mia_core.audit.sources import read_books, write_uploads
from mia_core.dataset_inference import DiSettings, dataset_inference, false_positive_check, feature_table
from mia_core.inputs.tables import InputError
from mia_core.limits import RequestTooLarge, check_upload_set
from mia_core.runs.store import ResultsStore
from ui.jobs import session_folder
from ui.model_work import model_slot, queued
from ui.models import cached_model

WHOLE_SET = "All audited books"
BOOK_TYPES = ["txt", "md", "pdf", "epub", "zip", "csv", "jsonl"]


@st.cache_data(show_spinner=False, max_entries=8)
def snippet_features(spec: str, fingerprint: str, texts: tuple[str, ...], bos: str) -> pd.DataFrame:
    """Features of snippets under the run's model (its statistics come from the on-disk cache the run filled), in
    its turn in the server's line (validation books uploaded here are scored)."""
    lm = cached_model(spec)
    with model_slot() as progress:
        return feature_table(lm, list(texts), bos=bos, long_text="truncate", lowercase=False, progress=progress)


@st.cache_data(show_spinner=False, max_entries=8)
def inference_rows(spec: str, fingerprint: str, audit: tuple[tuple[str, str], ...], validation: tuple[tuple[str, str], ...],
                   bos: str, settings: dict) -> tuple[list[dict], dict]:
    """One row per scope (the whole set, then each book) and the shared false-positive check, as plain dicts."""
    di = DiSettings(**settings)
    features = snippet_features(spec, fingerprint, tuple(t for _, t in audit + validation), bos)
    suspects, held = features.iloc[:len(audit)].reset_index(drop=True), features.iloc[len(audit):]
    books = pd.Series([b for b, _ in audit])
    check, how = false_positive_check(held, di, groups=[g for g, _ in validation])
    rows = []
    for scope in [WHOLE_SET, *sorted(books.unique())]:
        part = suspects if scope == WHOLE_SET else suspects[(books == scope).to_numpy()]
        try:
            result = dataset_inference(part, held, di, check=(check, how))
        except ValueError as err:
            rows.append({"scope": scope, "snippets": len(part), "p_value": None, "evidence": None, "conclusion": str(err)})
            continue
        rows.append({"scope": scope, "snippets": len(part), "p_value": result.p_value, "evidence": result.test.rejects,
                     "conclusion": result.conclusion, "detail": result.to_dict()})
    return rows, {"p_value": check.p_value, "rejects": check.rejects, "split": how, "n": len(held)}


def validation_pairs(snippets: pd.DataFrame, stored: AuditSettings, upload) -> tuple[tuple[str, str], ...]:
    """(book, snippet text) of the validation set: the run's non-member calibration snippets, or uploaded books."""
    if upload is None:
        rows = snippets[(snippets["role"] == "calibration") & (snippets["label"] == 0)]
        return tuple(zip(rows["book"], rows["text"]))
    check_upload_set([f.size for f in upload], "The validation upload")
    folder = session_folder("di_workdir", "mia-di-")  # one folder per session, removed with it
    books, _ = read_books(write_uploads({f.name: f.getvalue() for f in upload}, folder / "validation"))
    pieces, _ = book_snippets(books, stored.snippet_words, stored.max_snippets_per_book)
    return tuple((p.book, p.text) for p in pieces)


def dataset_inference_ui(store: ResultsStore, run_id: str, run: dict, lm) -> None:
    """Dataset inference on a finished run, per book and for all audited books, each beside its false-positive check."""
    st.markdown("**Dataset inference** (Maini et al. 2024) — a set-level test: many methods' scores of each snippet "
                "feed a linear model trained on half of the suspect and validation snippets; a one-sided t-test on the "
                "other halves gives a p-value (median over seeded shuffles), p < 0.1 = evidence. The validation books "
                "must be of the same kind as the audited ones; the false-positive check (validation books against each "
                "other) must not reject.")
    if lm is None or lm.fingerprint != run["fingerprint"]:
        st.info("Dataset inference needs the run's own model (its snippet statistics); it cannot be loaded here.")
        return
    c1, c2, c3 = st.columns(3)
    source = c1.radio("Validation set", ["calibration", "upload"], key="di_source", horizontal=True,
                      format_func={"calibration": "This run's non-member calibration books", "upload": "Upload"}.get)
    upload = None
    if source == "upload":
        upload = st.file_uploader("Known non-member books of the same kind", type=BOOK_TYPES, accept_multiple_files=True,
                                  key="di_upload") or None
        if upload is None:
            st.info("Upload at least one known non-member book.")
            return
    shuffles = c2.number_input("Shuffles", 1, 50, 10, key="di_shuffles", help="the p-value is the median over them")
    seed = c3.number_input("Seed", 0, 2**31 - 1, 0, key="di_seed")
    request = (run_id, source, int(shuffles), int(seed), tuple(f.name for f in upload or ()))
    if st.button("Run dataset inference", key="di_run"):
        st.session_state["di_request"] = request
    if st.session_state.get("di_request") != request:
        return
    snippets = store.results(run_id, with_texts=True)
    stored = AuditSettings(**run["config"])
    try:
        validation = validation_pairs(snippets, stored, upload)
    except (InputError, RequestTooLarge) as err:
        st.error(str(err))
        return
    audit_rows = snippets[snippets["role"] == "audit"]
    audit = tuple(zip(audit_rows["book"], audit_rows["text"]))
    if set(t for _, t in validation) & set(t for _, t in audit):
        st.error("Some validation snippets are also audited snippets: the validation set must hold known non-members.")
        return
    settings = asdict(DiSettings(n_shuffles=int(shuffles), seed=int(seed)))
    try:
        n_tests = len(set(audit_rows["book"])) + 1
        with st.spinner(f"Features of {len(audit) + len(validation):,} snippets and {n_tests} tests …"):
            rows, check = queued(lambda: inference_rows(run["model"], run["fingerprint"], audit, validation,
                                                        stored.bos, settings), "Dataset inference")
    except ValueError as err:
        st.error(f"Dataset inference cannot run on this validation set: {err}")
        return
    show_results(rows, check)


def show_results(rows: list[dict], check: dict) -> None:
    """The false-positive check, the table of scopes, and one scope's full result."""
    verdict = "rejects: no result below can be trusted" if check["rejects"] else "does not reject, as it should"
    (st.error if check["rejects"] else st.success)(
        f"False-positive check ({check['n']} validation snippets, {check['split']}): p = {check['p_value']:.3g} — "
        f"{verdict}.")
    table = pd.DataFrame([{k: r[k] for k in ("scope", "snippets", "p_value", "evidence")} for r in rows])
    st.dataframe(table, hide_index=True, key="di_table",
                 column_config={"p_value": st.column_config.NumberColumn("p-value", format="%.3g"),
                                "evidence": st.column_config.CheckboxColumn("p < 0.1")})
    scope = st.selectbox("Result in words", [r["scope"] for r in rows], key="di_scope")
    row = next(r for r in rows if r["scope"] == scope)
    st.markdown(row["conclusion"])
    if "detail" in row:
        with st.expander("Per-shuffle p-values, features and weights"):
            detail = row["detail"]
            st.write({"p_values": [round(p, 4) for p in detail["p_values"]], "seeds": detail["seeds"],
                      "n_train": detail["n_train"], "dropped features": detail["dropped"]})
            names = detail["features"]
            st.dataframe(pd.DataFrame({"feature": names, "member weight": [detail["member_weights"][f] for f in names],
                                       "shift (suspect − validation, sd)": [detail["shifts"][f] for f in names]}),
                         hide_index=True, key="di_features")
