"""The report of a DE-COP run on a chat API (METHODS-API.md §19): each audited book's quiz accuracy against the clean
books run the same way, which clean books calibrated it, what the evidence can and cannot show, and the evidence
record's head hash. Every string from a file, a book or an answer is escaped (`names.html_text`)."""
from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd

from ..blackbox.decop_passages import QuizBook
from ..blackbox.decop_stats import ALPHA, MIN_CLEAN_BOOKS, DecopSummary, summarize
from ..names import html_text
from ..runs.api_results import results_table, run_texts, stored_results
from ..runs.evidence import EvidenceRecord
from ..runs.store import ResultsStore
from .api_procedures import CLAIM_WORDS
from .api_report import meta_table, record_section
from .pdf import PRINT_STYLE, html_to_pdf
from .report import STYLE

LIMITS = [
    "A book's accuracy significantly above the clean books' is inferential evidence that the model was exposed to "
    "<i>that book's text</i>: not extraction, and not evidence about the rest of its training data.",
    "Not evidence: single correct answers; an accuracy above 0.25 alone (models can prefer an original's style); a "
    "comparison with clean books paraphrased by another process, asked another prompt or put to another model.",
    "The clean books must postdate the model's training cutoff and match the audited book in genre and era; the "
    "comparison is only as good as they are.",
    "Paraphrases made by the audited model itself carry its style and may be easier to reject, which inflates "
    "accuracy; the paraphrases' provenance is stated for every book in this report.",
    "Temperature 0 at an API is not deterministic, and production models change: the stored exchanges are the "
    "evidence, a rerun is corroboration at best.",
]


SELF_PARAPHRASED = ("the paraphrases were made by the audited model itself: its own paraphrases carry its style and "
                    "may be easier to reject as not the original, which inflates accuracy")


def self_paraphrased(provenance: str, *models: str | None) -> bool:
    """Whether a provenance names the audited model (by the name asked or the one it answered with)."""
    return any(m and m in provenance for m in models)


def decop_summary(store: ResultsStore, run_id: str) -> tuple[DecopSummary, pd.DataFrame]:
    """The run's summary from its stored results (a pure function of them), and its texts."""
    texts = run_texts(store, run_id)
    results = stored_results(store, run_id)
    done = texts[texts.unit.isin(results)]
    return summarize({u: results[u] for u in done.unit}, dict(zip(done.unit, done.role)),
                     dict(zip(done.unit, done.name))), texts


def decop_table(summary: DecopSummary) -> pd.DataFrame:
    """One row per audited book: its accuracies and its standing among the clean books."""
    return pd.DataFrame([{"book": b.name, "accuracy": b.accuracy, "accuracy_raw": b.accuracy_raw, "z": b.z,
                          "percentile": b.percentile, "bootstrap_lower": b.boot_lower, "bootstrap_p": b.boot_p,
                          "above_clean": b.above_clean} for b in summary.books])


def verdict_words(summary: DecopSummary, *, html: bool = True) -> list[str]:
    """One sentence per audited book, in plain words (`html`: the name escaped and in bold, for a report)."""
    if not summary.compared:
        return [f"Only {len(summary.clean)} clean book(s) finished: at least {MIN_CLEAN_BOOKS} are needed before a "
                "book's accuracy is compared with them."]
    out = []
    for b in summary.books:
        standing = (f"z = {b.z:+.2f}, above {b.percentile:.0f}% of the clean books; passages resampled, its accuracy "
                    f"is at least {b.boot_lower:.1%} in {1 - ALPHA:.0%} of resamples")
        verdict = ("significantly above the clean books: evidence of exposure to this book's text" if b.above_clean
                   else "not significantly above the clean books: no evidence either way")
        name = f"<b>{html_text(b.name)}</b>" if html else b.name
        out.append(f"{name}: accuracy {b.accuracy:.1%} (clean books {summary.clean_mean:.1%} ± "
                   f"{summary.clean_sd or 0:.1%}); {standing}; {verdict}.")
    return out


def beside_extraction(store: ResultsStore, extraction_run: str, titles: list[str]) -> str:
    """The same books' two-phase extraction from another run, each in its own words: nv-recall and blocks of at least
    `CLAIM_WORDS` words, with that run's head hash (books matched by name)."""
    try:
        kind = store.run(extraction_run)["kind"]
    except KeyError:
        kind = None
    if kind != "api-extraction":
        raise ValueError(f"run {extraction_run!r} is not a book-extraction run (mia extract-books) in {store.path}")
    table = results_table(store, extraction_run)
    table = table[table["name"].isin(titles) | (table["role"] == "control")]
    shown = pd.DataFrame({"text": table["name"], "role": table["role"].map({"book": "book", "control":
                                                                            "negative control"}),
                          "nv-recall": table.get("nv_recall", pd.Series(dtype=float)).map(
                              lambda v: "" if pd.isna(v) else f"{v:.1%}"),
                          f"blocks ≥ {CLAIM_WORDS} words": table.get("claim_blocks", pd.Series(dtype=float))})
    return (f"<h2>Extraction of the same books (run {html_text(extraction_run)})</h2><p>Extraction is other "
            f"evidence: a block of at least {CLAIM_WORDS} near-verbatim words from the opening alone shows the model "
            "reproduces the text; DE-COP's accuracy is inferential. Neither result is read into the other.</p>"
            + shown.astype(object).where(shown.notna(), "").astype(str).to_html(index=False, escape=True, border=0)
            + meta_table({"head hash": EvidenceRecord(store, extraction_run).head() or "(no record)",
                          "verify": f"mia verify {extraction_run} --store {store.path}"}))


def decop_report_html(store: ResultsStore, run_id: str, *, printed: bool = False,
                      extraction_run: str | None = None) -> str:
    """The whole report of a DE-COP run as one HTML string (`printed`: the print layout, for the PDF; with
    `extraction_run`, the same books' two-phase extraction beside it)."""
    run = store.run(run_id)
    manifest = run["config"]
    summary, texts = decop_summary(store, run_id)
    evidence = EvidenceRecord(store, run_id)
    requests, input_tokens, output_tokens = evidence.usage_totals()
    settings = manifest["settings"]
    books = [QuizBook.from_json(t) for t in texts.text]
    provenance = pd.DataFrame({"book": [b.title for b in books], "role": texts.role.map(
        {"book": "audited", "control": "clean"}), "passages": [len(b.passages) for b in books],
        "set aside by the gates": [len(b.excluded) for b in books], "paraphrases from": [b.provenance for b in books]})
    clean = pd.DataFrame({"clean book": list(summary.clean), "accuracy": [f"{a:.1%}" for a in summary.clean.values()]})
    mu = ", ".join(f"{letter} {m:.3f}" for letter, m in zip("ABCD", summary.mu)) if summary.mu else \
        "none (tier G: the letter answered, uncalibrated)"
    sections = [
        f"<h1>DE-COP quiz on a chat API</h1><p class='note'>Generated "
        f"{html_text(datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC'))} by MIA Lens "
        f"{html_text(manifest['tool_version'])}. Run <code class='run-id'>{html_text(run_id)}</code>.</p>",
        "<h2>Summary</h2><ul>" + "".join(f"<li>{w}</li>" for w in verdict_words(summary)) + "</ul>"
        + (f"<p class='warn'><b>Warning</b>: {SELF_PARAPHRASED}.</p>" if any(
            self_paraphrased(b.provenance, manifest["model"], manifest.get("answered_model")) for b in books) else ""),
        "<h2>Run</h2>" + meta_table({
            "model (as asked)": manifest["spec"], "model (as it answered)": str(manifest.get("answered_model")),
            "access tier": manifest["tier"],
            "method": "DE-COP (Duarte et al. 2024): which of four passages — the original and three paraphrases — "
                      "is the book's, in all 24 orders; accuracy against clean books run the same way",
            "settings": f"{'letter log-probs (top ' + str(settings['top_logprobs']) + ')' if settings['logprobs'] else 'letter answered'}; "
                        f"{settings['max_tokens']} token(s); temperature {settings['temperature']}; seed {settings['seed']}",
            "calibration μ (each letter's mean probability over every question)": mu,
            "spent": f"{requests:,} requests answered, {input_tokens:,} input + {output_tokens:,} output tokens; "
                     f"prices {manifest['prices']}",
            "operator": manifest["operator"], "started": manifest["started_at"], "status": run["status"]}),
        "<h2>Clean books that calibrated it</h2>" + clean.to_html(index=False, escape=True, border=0),
        "<h2>Passages and their paraphrases</h2>" + provenance.to_html(index=False, escape=True, border=0),
        beside_extraction(store, extraction_run, [b.title for b in books]) if extraction_run else "",
        "<h2>Limits of the evidence</h2><ul>" + "".join(f"<li>{item}</li>" for item in LIMITS) + "</ul>",
        record_section(store, run_id, evidence.head(), manifest),
    ]
    head = f"<style>{STYLE}{PRINT_STYLE if printed else ''}</style>"
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>MIA Lens DE-COP "
            f"{html_text(run_id)}</title>{head}</head><body>{''.join(sections)}</body></html>")


def decop_report_pdf(store: ResultsStore, run_id: str, *, extraction_run: str | None = None) -> bytes:
    """The report as an A4 PDF (WeasyPrint; a RuntimeError naming what is missing without it)."""
    return html_to_pdf(decop_report_html(store, run_id, printed=True, extraction_run=extraction_run))
