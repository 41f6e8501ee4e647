"""The report of a book-extraction run on a chat API (HTML, and PDF through the audit report's print layout): each
book's near-verbatim recall beside the negative control's, what the evidence can and cannot show, and the evidence
record's head hash with the command that re-checks it. Every string from a file, a book or an answer is escaped
(`names.html_text`)."""
from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd

from ..names import html_text
from ..runs.api_results import results_table, run_texts
from ..runs.evidence import EvidenceRecord
from ..runs.store import ResultsStore
from .api_procedures import CLAIM_WORDS
from .pdf import PRINT_STYLE, html_to_pdf
from .report import STYLE

#: The results table's columns and their headers (tokens per text are in the CSV; the run's total is above).
COLUMNS = {"name": "text", "role": "role", "nv_recall": "nv-recall", "claim_blocks": f"blocks ≥ {CLAIM_WORDS} words",
           "max_block": "longest block", "m": "verbatim words", "missing": "missing", "additional": "additional",
           "phase1_s": "probe s", "halt": "halted by", "phase2_turns": "turns", "refusals": "refusals"}

LIMITS = [
    "nv-recall is a loose lower bound: passages the model gives out of order or more than once, and passages broken "
    "by small edits, count as missing; another seed or other settings may reveal more.",
    f"A block of at least {CLAIM_WORDS} near-verbatim words, produced from the opening sentence alone, is evidence that "
    "the model reproduces <i>this text</i>. It is not evidence about the rest of the model's training data, and it "
    "does not say how the text reached the model (the book itself, quotations, copies elsewhere).",
    "Not evidence: a probe that succeeds without later blocks; blocks shorter than "
    f"{CLAIM_WORDS} words; additional text that retells the plot, characters or themes (which this measure does not "
    "count).",
    "A refusal, a filtered or an empty answer is not evidence of absence: a model may know a text and decline to "
    "reproduce it.",
    "Temperature 0 at an API is not deterministic, and production models change and are withdrawn: the stored "
    "exchanges are the evidence, a rerun is corroboration at best. Results of different models or settings are "
    "comparable only when their configurations match.",
    "The record holds the books' text and the model's reproductions of it: keep the store access-controlled. MIA "
    "Lens does not record whether the providers were notified of the results; say so in any publication.",
]


def api_report_html(store: ResultsStore, run_id: str, *, printed: bool = False) -> str:
    """The whole report of the run as one HTML string (`printed`: the print layout, for the PDF)."""
    run = store.run(run_id)
    manifest = run["config"]
    table = results_table(store, run_id)
    evidence = EvidenceRecord(store, run_id)
    requests, input_tokens, output_tokens = evidence.usage_totals()
    settings = manifest["settings"]
    sections = [
        f"<h1>Book extraction from a chat API</h1><p class='note'>Generated "
        f"{html_text(datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC'))} by MIA Lens "
        f"{html_text(manifest['tool_version'])}. Run <code class='run-id'>{html_text(run_id)}</code>.</p>",
        _summary(table),
        "<h2>Run</h2>" + meta_table({
            "model (as asked)": manifest["spec"], "model (as it answered)": ", ".join(
                sorted({m for ms in table.get("models_answered", pd.Series(dtype=object)).dropna() for m in ms}))
            or str(manifest.get("answered_model")),
            "access tier": f"{manifest['tier']} ({'text and its tokens’ log-probs' if manifest['tier'] == 'GL' else 'text only'})",
            "method": "two-phase extraction (Ahmed, Cooper, Koyejo & Liang 2026): the book's opening, then "
                      f"“{settings['continue_message']}” turns; no jailbreak",
            "settings": f"profile {settings['profile']}; probe {settings['phase1_max_tokens']} tokens; "
                        f"{settings['max_tokens']} tokens per turn; at most {settings['max_turns']} turns; "
                        "temperature 0",
            "prices": f"{manifest['prices']}" + (f" (dated {manifest['price_date']})" if manifest.get("price_date") else ""),
            "spent": f"{requests:,} requests answered, {input_tokens:,} input + {output_tokens:,} output tokens",
            "operator": manifest["operator"], "started": manifest["started_at"], "status": run["status"]}),
        "<h2>Books and the negative control</h2>" + _table(table),
        "<h2>Limits of the evidence</h2><ul>" + "".join(f"<li>{item}</li>" for item in LIMITS) + "</ul>",
        record_section(store, run_id, evidence.head(), manifest),
    ]
    head = f"<style>{STYLE}{PRINT_STYLE if printed else ''}</style>"
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>MIA Lens book extraction "
            f"{html_text(run_id)}</title>{head}</head><body>{''.join(sections)}</body></html>")


def api_report_pdf(store: ResultsStore, run_id: str) -> bytes:
    """The report as an A4 PDF (WeasyPrint; a RuntimeError naming what is missing without it)."""
    return html_to_pdf(api_report_html(store, run_id, printed=True))


def _summary(table: pd.DataFrame) -> str:
    """One sentence per text: its recall and whether it supports a claim, the controls' beside the books'."""
    done = table.dropna(subset=["nv_recall"]) if "nv_recall" in table else table.iloc[0:0]
    if done.empty:
        return "<p>No text is finished yet.</p>"
    items = []
    for row in done.to_dict("records"):
        claim = (f"{int(row['claim_blocks'])} block(s) of at least {CLAIM_WORDS} words: evidence that the model "
                 "reproduces this text" if row["claim_blocks"] else f"no block of {CLAIM_WORDS} words: not evidence "
                 "of extraction")
        items.append(f"<li><b>{html_text(row['name'])}</b> ({'negative control' if row['role'] == 'control' else 'book'}"
                     f"): nv-recall {row['nv_recall']:.1%}; {claim}.</li>")
    controls = done[done["role"] == "control"]
    note = ("<p>The negative control shows what the method finds where there is nothing to find: a control with "
            f"blocks of {CLAIM_WORDS} words would mean the setup, not the model's memory, produced them.</p>")
    if not controls.empty and (controls["claim_blocks"] > 0).any():
        note = ("<p class='warn'><b>A negative control has blocks of at least "
                f"{CLAIM_WORDS} words</b>: the control may not be unseen by the model (check its date), or the setup "
                "produces matches by itself. Do not read the books' blocks as evidence until this is explained.</p>")
    return "<h2>Summary</h2><ul>" + "".join(items) + "</ul>" + note


def _table(table: pd.DataFrame) -> str:
    table = table.reindex(columns=list(COLUMNS) + ["halt_pattern"])
    pattern = table["halt_pattern"].map(lambda v: f" ({v})" if isinstance(v, str) else "")
    table["halt"] = table["halt"].map(lambda v: v if isinstance(v, str) else "") + pattern
    shown = table[list(COLUMNS)].rename(columns=COLUMNS)
    shown["nv-recall"] = shown["nv-recall"].map(lambda v: "" if pd.isna(v) else f"{v:.1%}")
    shown["probe s"] = shown["probe s"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    return shown.astype(object).where(shown.notna(), "").astype(str).to_html(index=False, escape=True, border=0)


def record_section(store: ResultsStore, run_id: str, head: str | None, manifest: dict) -> str:
    """The evidence record: its head hash, the command that re-checks it, and each text's SHA-256."""
    texts = run_texts(store, run_id)
    hashes = {t["unit"]: t["sha256"] for t in manifest["texts"]}
    digests = pd.DataFrame({"text": texts["name"], "role": texts["role"], "words": texts["text"].str.split().str.len(),
                            "sha256": texts["unit"].map(hashes)})
    return ("<h2>Evidence record</h2><p>Every request and answer of this run, retries included, is stored in the "
            "results store before it was used, append-only and hash-chained from the manifest; the numbers above are "
            "recomputed from the stored answers alone.</p>" + meta_table({
                "head hash": head or "(no record yet)", "store": str(store.path),
                "verify": f"mia verify {run_id} --store {store.path}",
                "normalisation": f"version {manifest['normalization']}"})
            + digests.to_html(index=False, escape=True, border=0, classes="digests"))


def meta_table(rows: dict) -> str:
    """Label–value rows, escaped."""
    return "<table class='meta'>" + "".join(f"<tr><td>{html_text(k)}</td><td>{html_text(v)}</td></tr>"
                                            for k, v in rows.items()) + "</table>"
