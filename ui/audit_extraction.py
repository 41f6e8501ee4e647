"""The Book audit's extraction: a checkbox with its settings and its cost before it runs, and, once computed, the
report's extraction section on the page.

The same pass as `mia audit-books --extraction` (`mia_core.audit.extraction_runs`): every audited and calibration
book's windows are planned into the results store as units and computed in the audit's background job once its
snippets are scored, so a stopped server resumes with only the unfinished units. Its cost, (P+S)/stride × the books'
tokens, is told before it runs and held to the bound of one request on this server's device (`mia_core.limits`),
like Explore's extraction: a larger pass runs from the command line.
"""
from __future__ import annotations

import math

import streamlit as st

from mia_core.audit.extraction import ExtractionEvidence
from mia_core.audit.extraction_report import extraction_section, strip_figure
from mia_core.audit.extraction_runs import extraction_result, run_extraction
from mia_core.audit.sources import Source
from mia_core.audit.timing import tokens_per_word
from mia_core.extract import ExtractionSettings
from mia_core.inputs.tables import InputError
from mia_core.limits import bound_place, token_pass_bound
from mia_core.model.options import ModelRef
from mia_core.runs.extraction_units import ExtractionUnits
from ui.audit_progress import POLL_S, results_store, source_signature, word_counts
from ui.explore_extraction import settings_ui
from ui.jobs import job_state, start_job
from ui.models import LOADED, cached_model
from ui.work_estimate import device_type

KEY = "audit_extraction"
#: Where the strip chart goes in the report's section (drawn by Streamlit, between the introduction and the table).
FIGURE_MARK = "<!--mia-extraction-figure-->"


def extraction_cost(words: int, per_word: float, settings: ExtractionSettings) -> tuple[int, int]:
    """(the books' tokens, about: words × tokens per word; token-passes: (P+S)/stride × those tokens)."""
    tokens = math.ceil(words * per_word)
    return tokens, math.ceil(tokens * settings.forward_tokens_per_text_token())


def extraction_ui(spec: str | None, calibration: Source | None, books: Source | None,
                  bos: str) -> tuple[ExtractionSettings | None, str | None]:
    """The checkbox and, ticked, its settings and cost: (settings, None) to run it; (None, why not) when ticked but
    it cannot run here (Run is then held back); (None, None) unticked."""
    if not st.checkbox("Extraction: can the model reproduce these books word for word?", key=KEY,
                       help="Also test (n,p)-discoverable extraction along every audited and calibration book, as "
                            "`mia audit-books --extraction` does: evidence about the model, reported apart from "
                            "membership."):
        return None, None
    settings = settings_ui(bos, key="audit_x")
    if settings is None:
        return None, "the extraction settings are not valid"
    if spec is None or calibration is None or books is None or st.session_state.get(LOADED) != spec:
        st.caption("The extraction's cost is shown once a model is loaded and the books are chosen.")
        return None, "the cost of the extraction is not known yet"
    try:
        words = sum(word_counts(source_signature(calibration), "calibration", calibration)
                    + word_counts(source_signature(books), "audit", books))
    except (InputError, ValueError, OSError):
        return settings, None  # the books cannot be read: Run says why
    tokens, passes = extraction_cost(words, tokens_per_word(cached_model(spec)), settings)
    device = device_type(spec)
    bound, where = token_pass_bound(device), bound_place(device)
    line = (f"Extraction cost before it runs: (prefix {settings.prefix} + suffix {settings.suffix}) / stride "
            f"{settings.stride} = {settings.forward_tokens_per_text_token():g} × about {tokens:,} tokens of the books "
            f"= **about {passes:,} token-passes**")
    if passes > bound:
        st.error(f"{line}, over the {bound:,} one request may cost on {where}: raise the stride, audit "
                 "fewer or shorter books, or run `mia audit-books --extraction` from the command line.")
        return None, "the extraction is over this server's bound"
    st.caption(f"{line}, within the {bound:,} one request may cost on {where}. It runs after the "
               "snippets are scored, in the same background job.")
    return settings, None


@st.cache_data(show_spinner=False, max_entries=16)
def cached_evidence(x_run: str, done: int, status: str, ci: float) -> ExtractionEvidence:
    """A finished extraction run's figures (recomputed only when its stored units or its status change: read once
    it is "scored", the read marks it "done", even if the page read its last units before the job said so)."""
    return extraction_result(results_store(), x_run, ci=ci)


def resume(x_run: str, spec: str) -> None:
    """Compute the run's pending units in a background job of this server (its books are in the store)."""
    lm = cached_model(spec)
    start_job(x_run, lambda: run_extraction(results_store(), x_run, ModelRef(spec), lm=lm))


@st.fragment(run_every=POLL_S)
def pending_ui(run_id: str, x_run: str) -> None:
    """An unfinished extraction: its progress from the store; a button to resume it when no job of this server is
    computing it; the page reruns once it is done."""
    done, total = ExtractionUnits(results_store().path).progress(x_run)
    if done == total:
        st.rerun()
    jobs = [job for job in (job_state(run_id), job_state(x_run)) if job is not None]  # the audit's, or a resume
    alive = any(job.thread.is_alive() for job in jobs)
    errors = [job.error for job in jobs if job.error]
    if errors and not alive:
        st.error(f"The extraction stopped: {errors[-1]}. Finished units are kept; resume it to go on.")
    st.progress(done / max(total, 1), text=f"Extraction {x_run}: {done:,} of {total:,} units of windows computed")
    if not alive and st.button("Resume extraction here", key="audit_x_resume"):
        resume(x_run, results_store().run(x_run)["model"])
        st.rerun()


def extraction_results_ui(run_id: str, ci: float) -> ExtractionEvidence | None:
    """The report's extraction section for the audit run, when an extraction was made beside it: the newest one's
    figures once every unit is computed (else its progress); None when there is none, or it is not finished."""
    runs = ExtractionUnits(results_store().path).runs_for(run_id)
    if runs.empty:
        return None
    x_run = str(runs["run_id"].iloc[0])
    done, total = ExtractionUnits(results_store().path).progress(x_run)
    if done < total:
        st.markdown("**Verbatim extraction**")
        pending_ui(run_id, x_run)
        return None
    evidence = cached_evidence(x_run, done, results_store().run(x_run)["status"], ci)
    before, after = extraction_section(evidence, FIGURE_MARK).split(FIGURE_MARK)
    st.html(before)
    st.plotly_chart(strip_figure(evidence), key="audit_extraction_strip")
    st.html(after)
    return evidence
