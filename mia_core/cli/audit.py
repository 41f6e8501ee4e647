"""`mia audit-books`: per-book contamination rates against a calibrated threshold, resumable, with a report."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..audit.calibration import RULES
from ..audit.extraction import ExtractionEvidence, finding
from ..audit.extraction_runs import extraction_books, extraction_result, plan_extraction, run_extraction
from ..audit.jobs import AuditSettings, audit_result, plan_audit, run_scoring
from ..audit.pdf import UNAVAILABLE as PDF_UNAVAILABLE
from ..audit.report import write_report
from ..audit.sources import AuditInputs, read_audit_inputs, source_name
from ..extract import ExtractionSettings
from ..limits import is_run_id
from ..methods import get_method
from ..model.options import ModelOptions, ModelRef
from ..runs.extraction_units import UNIT_WINDOWS, ExtractionUnits
from ..runs.ray_driver import WorkerError
from ..runs.store import ResultsStore
from ..model.chat.spec import is_chat_spec
from .app import fail
from .groups import Backend, load, option_groups
from .options import (
    BosOpt, FreqOpt, KOpt, ModelOpt, ParamOpt, PrefixOpt, StrideOpt, SuffixOpt, TemperatureOpt, TopKOpt, check_options,
    method_inputs, parse_params,
)
from .progress import progress_bar
from .terminal import echo, one_line

commands = typer.Typer()

#: What a book audit can supply to a method (a reference model or a fitted classifier cannot travel in a job).
AUDIT_NEEDS = {"stats", "lowercase_stats", "freq", "lm"}


@commands.command("audit-books")
@option_groups
def audit_books_cmd(
    model: str = ModelOpt,
    calibration: str = typer.Option(..., "--calibration", help="known member/non-member books: a table with book, text, "
                                    "label columns, a folder or zip with members/ and non_members/, or demo-books"),
    books: str = typer.Option(..., "--books", help="books to audit: .txt/.md/.pdf/.epub, a folder or zip of them, a table "
                              "with book and text columns, or demo-books (its held-out audit plays)"),
    output_dir: Path = typer.Option(..., "--output-dir", help="where report.html, books.csv and snippets.csv go"),
    pdf: bool = typer.Option(False, "--pdf", help="also write report.pdf: the report on A4 pages, page numbers in the "
                             "footer, figures as vector graphics (rendered with WeasyPrint; needs the Pango library)"),
    method: str = typer.Option("min_k_pp", "--method", help="membership method (see: mia methods)"),
    k: float = KOpt,
    param: Optional[List[str]] = ParamOpt,
    freq: Optional[Path] = FreqOpt,
    snippet_words: int = typer.Option(512, "--snippet-words", help="words per snippet (Min-K% book study: 512)"),
    max_snippets_per_book: Optional[int] = typer.Option(None, "--max-snippets-per-book", help="score at most this many "
                                                        "snippets per book, evenly spread along it (cheaper, wider intervals)"),
    rule: str = typer.Option("fpr", "--rule", help="threshold rule: fpr (hold --target-fpr) or accuracy (maximise it)"),
    target_fpr: float = typer.Option(0.05, "--target-fpr", help="FPR the threshold holds on non-member snippets"),
    bos: str = BosOpt,
    seed: int = typer.Option(0, "--seed", help="bootstrap seed"),
    n_boot: int = typer.Option(1000, "--n-boot", help="bootstrap resamples"),
    store: Optional[Path] = typer.Option(None, "--store", help="results store (DuckDB file); default: the shared one "
                                         "in the MIA Lens cache, which the dashboard reads"),
    job_id: Optional[str] = typer.Option(None, "--job-id", help="resume or name a job (default: derived from the "
                                         "model, method, settings and texts, so re-running resumes); a named job "
                                         "whose model, scoring settings or texts changed is refused"),
    batch_snippets: int = typer.Option(16, "--batch-snippets", help="snippets scored and committed per batch"),
    extraction: bool = typer.Option(False, "--extraction", help="also test verbatim extraction along every book "
                                    "(audited and calibration): evidence about the model, reported apart from "
                                    "membership; costs (prefix+suffix)/stride forward tokens per book token"),
    prefix: int = PrefixOpt,
    suffix: int = SuffixOpt,
    stride: int = StrideOpt,
    top_k: int = TopKOpt,
    temperature: float = TemperatureOpt,
    options: ModelOptions = ModelOptions(),
    backend: Backend = Backend(),
) -> None:
    """Audit books: contamination rate, prevalence and a test per book, against calibration books."""
    if is_chat_spec(model):
        fail("a chat API gives no log-probs of a given text, which book audits score: audit its books with mia "
             "extract-books (two-phase extraction) or mia decop-books (the DE-COP quiz against clean books)")
    check_options(k=k, bos=bos, long_text="truncate", n_boot=n_boot)
    if job_id is not None and not is_run_id(job_id):  # a run id is shown in pages and names a run: the one pattern
        fail(f"--job-id must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit "
             f"(got {job_id!r})")
    spec = get_method(method)
    if set(spec.needs) - AUDIT_NEEDS:
        fail(f"method {method} needs {', '.join(sorted(set(spec.needs) - AUDIT_NEEDS))}, which book audits do not supply")
    if rule not in RULES:
        fail(f"--rule must be {' or '.join(RULES)} (got {rule!r})")
    if not 0 < target_fpr < 1:
        fail(f"--target-fpr must be between 0 and 1 (got {target_fpr})")
    if snippet_words < 1 or batch_snippets < 1 or (max_snippets_per_book is not None and max_snippets_per_book < 1):
        fail("--snippet-words, --batch-snippets and --max-snippets-per-book must be at least 1")
    if pdf and PDF_UNAVAILABLE:  # said before any scoring, not after an hour of it
        fail(f"--pdf: {PDF_UNAVAILABLE}")
    try:
        extraction_settings = ExtractionSettings(prefix, suffix, stride, top_k, temperature, bos) if extraction else None
    except ValueError as err:
        fail(str(err))
    params = {"k": k} if "k" in spec.param_names else {}
    params.update(parse_params(param, [method]))
    spec.make_params(**params)  # rejects bad values early
    if method_inputs([method], params, ref_model=None, freq=freq, options=options).get("freq") is not None:
        if not freq.is_file():
            fail(f"--freq: no such file: {freq}")
        params["freq"] = str(freq.resolve())  # an input, carried in the job (Ray workers read the same path)
    results = ResultsStore(store)  # a corrupt or foreign file fails here, before the model is loaded
    inputs = read_audit_inputs(books, calibration)
    output_dir.mkdir(parents=True, exist_ok=True)
    settings = AuditSettings(method=method, params=params, snippet_words=snippet_words,
                             max_snippets_per_book=max_snippets_per_book, bos=bos, rule=rule,
                             target_fpr=target_fpr, seed=seed, n_boot=n_boot, batch_snippets=batch_snippets,
                             calibration_source=source_name(calibration), books_source=source_name(books))
    ref = ModelRef(model, options)
    lm = load(model, backend.driver(options))  # with Ray: fingerprint (job id) and report heatmaps only
    run_id = plan_audit(results, ref, inputs.books, inputs.calibration, settings, inputs.problems, lm=lm, run_id=job_id,
                        backend=backend.name)
    for row in results.problems(run_id).itertuples():
        echo(f"warning: {row.role} book skipped: {one_line(row.message)}", err=True)
    done, total = results.progress(run_id)
    echo(f"job {run_id}: {total} snippets" + (f", {done} already scored (resuming)" if done else "")
               + f"; store {results.path}", err=True)
    try:
        progress = progress_bar("scoring snippets", "snippets", done=done, total=total)  # a resumed job counts on
        run_scoring(results, run_id, ref, lm=lm, progress=progress, **backend.where(ref))
    except WorkerError as err:
        fail(f"job {run_id}: {err}")
    result = audit_result(results, run_id, settings)
    if extraction_settings is not None:  # units of windows in the store: resumable, split by claims, on Ray too
        result.extraction = extraction_step(results, ref, lm, inputs, extraction_settings, run_id, settings.ci, backend)
    paths = write_report(result, output_dir, lm, pdf=pdf)
    cal = result.calibration
    echo(f"calibration: AUROC {cal.auroc:.3f} [{cal.auroc_ci[0]:.3f}, {cal.auroc_ci[1]:.3f}], threshold "
               f"{cal.threshold:.4g}, TPR {cal.tpr:.1%}, FPR {cal.fpr:.1%}")
    for warning in cal.warnings:
        echo(f"  warning: {warning}")
    for row in result.books.itertuples():
        echo(f"{one_line(row.book)[:40]:40s} {row.n_snippets:5d} snippets  rate {row.rate:6.1%}  prevalence {row.prevalence:6.1%} "
                   f"[{row.prevalence_lo:.0%}, {row.prevalence_hi:.0%}]  p_adj {row.p_adj:.2g}\n    {row.verdict}")
    if result.extraction is not None:
        for row in result.extraction.table.to_dict("records"):
            echo(f"{one_line(row['book'])[:40]:40s} ({row['role']}) extraction: {finding(row)}")
    echo(f"wrote {', '.join(str(p) for p in paths.values())}", err=True)


def extraction_step(results: ResultsStore, ref: ModelRef, lm, inputs: AuditInputs, settings: ExtractionSettings,
                    audit_run: str, ci: float, backend: Backend) -> ExtractionEvidence:
    """Plan (or resume) the extraction run beside the audit, compute its pending units, read its figures."""
    try:
        x_run = plan_extraction(results, ref, lm, lambda: extraction_books(inputs), settings, audit_run=audit_run,
                                backend=backend.name)
    except ValueError as err:
        fail(str(err))
    done, total = ExtractionUnits(results.path).progress(x_run)
    echo(f"extraction job {x_run}: {total} units of up to {UNIT_WINDOWS} windows"
         + (f", {done} already computed (resuming)" if done else ""), err=True)
    try:
        run_extraction(results, x_run, ref, lm=lm, **backend.where(ref),
                       progress=progress_bar("extraction", "units", done=done, total=total))
    except WorkerError as err:
        fail(f"extraction job {x_run}: {err}")
    return extraction_result(results, x_run, ci=ci)
