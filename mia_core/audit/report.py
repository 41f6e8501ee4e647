"""Book-audit reports: a self-contained HTML file (plotly inlined, opens offline), its print-ready PDF and CSV tables.

The report says what was measured and what it can and cannot show: calibration quality, the per-book
table with intervals, the top-scoring snippets of each flagged book as token heatmaps, the books
that could not be audited, and the limits of the evidence. Every user string is HTML-escaped. The PDF is the same
sections laid out for A4 (`pdf`), with the figures drawn as vector SVG (`print_figures`).
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from ..csv_safe import to_csv_safe
from ..names import html_text, shown_name
from ..methods import get_method
from ..model.language_model import LanguageModel
from ..runs.atomic import atomic_outputs
from .books import BOOK_COLUMNS, VERDICT_MEANING, VERDICT_SHORT, equal_rate_notes, verdict_keys
from .calibration import BOOK_RATE_INTERVAL, PREVALENCE_INTERVAL, RATE_INTERVAL, weak_calibration_reason
from .figures import VERDICT_COLOURS, books_figure, calibration_figure
from .jobs import AuditResult
from .pdf import PRINT_STYLE, html_to_pdf
from .extraction import csv_frame as extraction_csv
from .extraction_report import extraction_section, strip_figure
from .plain_words import paragraphs_html
from .print_figures import books_chart_html, calibration_chart_html
from .provenance import provenance_html
from .report_snippets import snippets_section

BOOK_CSV_COLUMNS = BOOK_COLUMNS
SNIPPET_CSV_COLUMNS = ["snippet_id", "book", "role", "label", "position", "n_words", "n_tokens", "truncated", "score",
                       "flagged", "text"]
STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:0.2em} h2{border-bottom:1px solid #ddd;padding-bottom:0.2em;margin-top:1.6em}
table{border-collapse:collapse;font-size:0.9em;margin:0.5em 0} td,th{border:1px solid #ddd;padding:0.3em 0.6em;text-align:left}
th{background:#f4f4f4} .meta td:first-child{font-weight:600} .warn{background:#fff4e5;border-left:4px solid #f0a020;padding:0.5em 1em}
.note{color:#555;font-size:0.9em} details{margin:0.6em 0} summary{cursor:pointer;font-weight:600}
table.books{width:100%;table-layout:fixed} table.books td,table.books th{overflow-wrap:anywhere;vertical-align:top}
table.books td.verdict{font-weight:600;border-left:6px solid #888}
table.digests{width:100%;table-layout:fixed;font-size:.85em} table.digests td{overflow-wrap:anywhere}
"""


def flagged_books(result: AuditResult) -> list[str]:
    """Books whose verdict is evidence or weak evidence, in table order."""
    keys = verdict_keys(result.books, result.calibration)
    return [book for book, key in zip(result.books["book"], keys) if key in ("evidence", "weak")]


def write_csvs(result: AuditResult, output_dir: str | Path) -> tuple[Path, Path]:
    """`books.csv` (one row per audited book) and `snippets.csv` (every snippet, calibration included)."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    books_path, snippets_path = out / "books.csv", out / "snippets.csv"
    with atomic_outputs([books_path, snippets_path]) as temps:  # both replaced, or neither
        _write_csv_files(result, *temps)
    return books_path, snippets_path


def _write_csv_files(result: AuditResult, books_path: Path, snippets_path: Path) -> None:
    """books.csv, then snippets.csv with texts fetched a chunk at a time (a catalogue's texts never all in memory)."""
    to_csv_safe(result.books[BOOK_CSV_COLUMNS], books_path)
    with open(snippets_path, "w", encoding="utf-8", newline="") as handle:
        for i, chunk in enumerate(result.snippet_chunks()):
            to_csv_safe(chunk[SNIPPET_CSV_COLUMNS], handle, header=i == 0)
        if not len(result.snippets):
            handle.write(",".join(SNIPPET_CSV_COLUMNS) + "\n")


def report_html(result: AuditResult, lm: LanguageModel | None = None, *, printed: bool = False) -> str:
    """The whole report as one HTML string; with `lm`, flagged snippets are drawn as token heatmaps. `printed`: for
    the PDF (figures as SVG images, no script, the print layout)."""
    run, settings = result.run, result.settings
    spec = get_method(settings.method)
    flagged = flagged_books(result)
    sections = [
        f"<h1>Book audit report</h1><p class='note'>Generated {html_text(datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC'))} "
        f"by MIA Lens {html_text(run['code_version'])}. Run <code class='run-id'>{html_text(run['run_id'])}</code>.</p>",
        _summary(result, flagged),
        "<h2>Run</h2>" + _meta_table({
            "model": run["model"], "model fingerprint": run["fingerprint"], "method": f"{spec.label} ({spec.name})",
            "method parameters": ", ".join(f"{k}={v}" for k, v in settings.params.items()) or "none",
            "snippet size": f"{settings.snippet_words} words (each truncated to the model's context)",
            "BOS policy": settings.bos, "threshold rule": _rule(settings), "intervals": f"{settings.ci:.0%}; {settings.n_boot} "
            f"draws of a new book's TPR/FPR and AUROC resamples, seed {settings.seed}", "backend": run["backend"]}),
        provenance_html(result, lm),
        _calibration_section(result, printed),
        _books_section(result, printed),
        _extraction_section(result, printed),
        _limits_section(result),  # what the evidence cannot show, before pages of snippet text
        _problems_section(result),
        snippets_section(result, flagged, lm, printed),
    ]
    head = f"<style>{STYLE}{PRINT_STYLE}</style>" if printed else (
        f"<style>{STYLE}</style><script type='text/javascript'>{get_plotlyjs()}</script>")
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>MIA Lens book audit {html_text(run['run_id'])}"
            f"</title>{head}</head><body>{''.join(sections)}</body></html>")


def report_pdf(result: AuditResult, lm: LanguageModel | None = None) -> bytes:
    """The report as a print-ready A4 PDF: the same sections and verdicts as `report_html`, page numbers in the footer."""
    return html_to_pdf(report_html(result, lm, printed=True))


def write_report(result: AuditResult, output_dir: str | Path, lm: LanguageModel | None = None, *,
                 pdf: bool = False) -> dict[str, Path]:
    """Write report.html, books.csv and snippets.csv (and with `pdf`, report.pdf) into `output_dir`, all or none;
    returns their paths.

    The reports are rendered first, all files are written to temporary files, then renamed into place,
    so a failure never leaves a mix of new and old files.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"report": out / "report.html", "books": out / "books.csv", "snippets": out / "snippets.csv"}
    page = report_html(result, lm)
    printed = report_pdf(result, lm) if pdf else None
    if printed is not None:
        paths["pdf"] = out / "report.pdf"
    if result.extraction is not None:
        paths["extraction"] = out / "extraction.csv"
    with atomic_outputs(list(paths.values())) as temps:
        files = dict(zip(paths, temps))
        files["report"].write_text(page, encoding="utf-8")
        _write_csv_files(result, files["books"], files["snippets"])
        if printed is not None:
            files["pdf"].write_bytes(printed)
        if result.extraction is not None:
            to_csv_safe(extraction_csv(result.extraction), files["extraction"])
    return paths


def _summary(result: AuditResult, flagged: list[str]) -> str:
    cal = result.calibration
    n = len(result.books)
    keys = dict(zip(result.books["book"], verdict_keys(result.books, cal)))
    strong = [b for b in flagged if keys[b] == "evidence"]
    text = (f"{n} book{'s' if n != 1 else ''} audited. {len(strong)} show{'s' if len(strong) == 1 else ''} evidence "
            f"consistent with training on the book (Benjamini–Hochberg-adjusted p &lt; 0.05 and a prevalence interval "
            f"above 0), at a threshold that flags {cal.fpr:.1%} of the calibration's non-member snippets.")
    if not cal.informative:
        text = "<b>The method does not separate the calibration books, so no verdict is given.</b> " + text
    elif reason := weak_calibration_reason(cal):
        text = f"<b>The calibration is too weak for a verdict, so none is given</b>: {html_text(reason)}. " + text
    if unsure := sum(key == "inconclusive" for key in keys.values()):
        text += (f" <b>{unsure} book{'s are' if unsure != 1 else ' is'} inconclusive</b>: a flagged rate and prevalence "
                 "above the calibration's false-positive rate, but a book test that does not reach significance with "
                 "these counts; each verdict says about how many more snippets or calibration snippets would decide.")
    if few := sum(key == "too_few" for key in keys.values()):
        text += (f" <b>{few} book{'s have' if few != 1 else ' has'} too few snippets for a verdict</b>: with "
                 f"{cal.n_nonmember_snippets} non-member calibration snippets and {n} books, the book test cannot "
                 "reach significance; longer books (smaller snippets) or more calibration books would.")
    warnings = "".join(f"<li>{html_text(w)}</li>" for w in cal.warnings)
    return f"<p>{text}</p>" + (f"<div class='warn'><b>Read with care:</b><ul>{warnings}</ul></div>" if warnings else "")


def _rule(settings) -> str:
    if settings.rule == "fpr":
        return f"hold a target FPR of {settings.target_fpr:.1%} on the non-member calibration snippets"
    return "maximise snippet accuracy on the calibration books (Min-K% book study)"


def _calibration_section(result: AuditResult, printed: bool) -> str:
    cal = result.calibration
    lo, hi = (f"{x:.1%}" for x in cal.tpr_ci)
    flo, fhi = (f"{x:.1%}" for x in cal.fpr_ci)
    table = _meta_table({
        "calibration books": f"{cal.n_member_books} known members ({cal.n_member_snippets} snippets), "
                             f"{cal.n_nonmember_books} known non-members ({cal.n_nonmember_snippets} snippets)",
        "AUROC (snippets)": f"{cal.auroc:.3f} [{cal.auroc_ci[0]:.3f}, {cal.auroc_ci[1]:.3f}]",
        "threshold": f"{cal.threshold:.6g} (snippet flagged when its score ≥ threshold)",
        "TPR at threshold": f"{cal.tpr:.1%} [{lo}, {hi}] (Clopper–Pearson, {cal.n_member_snippets / cal.tpr_deff:.0f} "
                            f"effective snippets: design effect {cal.tpr_deff:.2f})",
        "FPR at threshold": f"{cal.fpr:.1%} [{flo}, {fhi}] (Clopper–Pearson, {cal.n_nonmember_snippets / cal.fpr_deff:.0f} "
                            f"effective snippets: design effect {cal.fpr_deff:.2f})",
        "spread between books": f"{cal.book_sd:.3g} (sd of a book's score offset)",
        "accuracy at threshold": f"{cal.accuracy:.1%}",
    })
    return (f"<h2>Calibration</h2><p class='note'>{cal.ci:.0%} intervals. TPR and FPR: {html_text(RATE_INTERVAL)} (a book's "
            "snippets are not independent; with no hit, or only hits, the scores' correlation is used, an upper bound). "
            "AUROC: percentile interval from resampling whole calibration books.</p>" + table
            + (calibration_chart_html(cal) if printed else _figure(calibration_figure(cal), "calibration-roc")))


def _books_section(result: AuditResult, printed: bool) -> str:
    cal = result.calibration
    keys = verdict_keys(result.books, cal)
    legend = "; ".join(f"<b>{html_text(VERDICT_SHORT[k])}</b>: {html_text(VERDICT_MEANING[k])}" for k in dict.fromkeys(keys))
    notes = "".join(f"<p class='warn'>{n}</p>" for n in equal_rate_notes(result.books, keys, quote=html_text))
    return ("<h2>Books</h2><p class='note'>rate = share of the book's snippets at or above the threshold; prevalence = "
            "(rate − FPR)/(TPR − FPR), clipped to [0, 1], the estimated share of the book seen in training. Rate interval: "
            f"{html_text(BOOK_RATE_INTERVAL)}; effective snippets are that count. Prevalence interval: {html_text(PREVALENCE_INTERVAL)}. "
            "p = one-sided Mann–Whitney U against the non-member calibration snippets; BH = Benjamini–Hochberg across the "
            f"books of this run.</p><p class='note'>Verdicts, at a threshold that flags {cal.fpr:.1%} of the calibration's "
            f"non-member snippets: {legend}.</p>" + notes
            + (books_chart_html(result.books, cal, keys) if printed else
               _figure(books_figure(result.books, cal, keys), "books-chart")) + _books_table(result.books, keys)
            + paragraphs_html(result, keys))


def _books_table(books: pd.DataFrame, keys: list[str]) -> str:
    """The per-book table, verdict first: intervals in their number's cell, long names wrapped, widths fixed."""
    head = ("<table class='books'><colgroup><col style='width:17%'><col style='width:21%'><col><col><col>"
            "<col style='width:9%'><col style='width:8%'><col style='width:8%'></colgroup><thead><tr><th>verdict</th>"
            "<th>book</th><th>prevalence [interval]</th><th>rate [interval]</th><th>snippets (effective)</th>"
            "<th>mean score</th><th>p</th><th>p (BH)</th></tr></thead>")  # a thead: repeated on each printed page
    rows = []
    for row, key in zip(books.itertuples(), keys):
        cells = [f"<td class='verdict' style='border-left-color:{VERDICT_COLOURS[key]}'>{html_text(VERDICT_SHORT[key])}</td>",
                 f"<td>{html_text(row.book)}</td>",
                 f"<td>{_pct(row.prevalence)} [{_pct(row.prevalence_lo)}–{_pct(row.prevalence_hi)}]</td>",
                 f"<td>{_pct(row.rate)} [{_pct(row.rate_lo)}–{_pct(row.rate_hi)}]</td>",
                 f"<td>{row.n_snippets} ({row.n_effective:.1f})</td>", f"<td>{row.mean_score:.4g}</td>",
                 f"<td>{_num(row.p_value)}</td>", f"<td>{_num(row.p_adj)}</td>"]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return head + "".join(rows) + "</table>"


def _pct(value) -> str:
    return "–" if pd.isna(value) else f"{value:.1%}"


def _num(value) -> str:
    return "–" if pd.isna(value) else f"{value:.2g}"


def _extraction_section(result: AuditResult, printed: bool) -> str:
    """Verbatim extraction, when the audit ran it: the strip chart on screen (in print, the table and findings)."""
    if result.extraction is None:
        return ""
    figure = "" if printed else _figure(strip_figure(result.extraction), "extraction-strip")
    return extraction_section(result.extraction, figure)


def _problems_section(result: AuditResult) -> str:
    if result.problems.empty:
        return ""
    problems = result.problems.astype(str).map(shown_name)  # also a store written before messages were escaped
    return "<h2>Books not audited</h2>" + problems.to_html(index=False, escape=True, border=0)


def _limits_section(result: AuditResult) -> str:
    cal = result.calibration
    items = [
        "A membership score is statistical evidence, not a record of what a model was trained on. A high rate is "
        "<i>consistent with</i> training on the book; it can also come from quotations, summaries or near-duplicates of "
        "the book elsewhere in the training data, or from text that is simply predictable.",
        f"Every verdict rests on the calibration: at this threshold {cal.fpr:.1%} of the known non-member snippets are "
        "flagged, so a clean book is expected to show about that rate. If the audited books differ from the calibration "
        "books (language, period, genre, edition, length), the FPR and TPR do not transfer and the verdicts are unreliable.",
        "Known non-member books must really be unseen by the model (e.g. published after its training cut-off). Members "
        "and non-members that differ in date or topic can be told apart without the model; check such a split with the "
        "blind baseline (mia eval) before trusting it.",
        "No evidence is not evidence of absence: a detector with TPR "
        f"{cal.tpr:.1%} misses many seen snippets, and models memorise little of most books they see once.",
        "The book test treats snippets as independent; neighbouring snippets are correlated, so its p-values are "
        "optimistic for books with long repeated passages. The intervals count effective snippets instead (design "
        "effects within calibration books and along each audited book); correlation beyond ⌈n^(1/3)⌉ neighbouring "
        "snippets is not captured.",
        "Snippets are truncated to the model's context, and the last part of a book shorter than one snippet is not scored.",
    ]
    return "<h2>Limits of the evidence</h2><ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _meta_table(rows: dict) -> str:
    return "<table class='meta'>" + "".join(f"<tr><td>{html_text(k)}</td><td>{html_text(v)}</td></tr>" for k, v in rows.items()) + "</table>"


def _figure(fig, div_id: str) -> str:
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id)


