"""What an audit report must let a reader check: which texts were audited (a SHA-256 per book), under which model,
code, settings and seeds, and the command that repeats the run.

A book's SHA-256 is of the text as audited: its snippets' texts, in order, each followed by a newline (UTF-8). With a
snippet cap that is less than the whole book, which is the point: it is what the scores describe. Texts are read
from the results store a chunk at a time, so a catalogue's texts are never all in memory.
"""
from __future__ import annotations

import hashlib
import html
import shlex

import pandas as pd

from ..model.language_model import LanguageModel
from ..runs.store import default_store_path
from .jobs import AuditResult

#: How each role of a snippet is named in the provenance table.
ROLE_NAMES = {"audit": "audited", "calibration": "calibration"}
#: How a calibration book's label is named there (an audited book has none).
LABEL_NAMES = {1: "known member", 0: "known non-member"}
#: What the repeat command names when the books were uploaded to the dashboard (no path to give).
UPLOADED = {"calibration": "UPLOADED_CALIBRATION_FOLDER", "books": "UPLOADED_BOOKS_FOLDER"}
DIGEST_COLUMNS = ["role", "book", "label", "snippets", "words", "sha256"]


def book_digests(result: AuditResult) -> pd.DataFrame:
    """One row per book of the run, calibration books included: role, book, label (calibration), snippets, words and
    the SHA-256 of the snippets' texts as audited (see the module's docstring); no store, no hash (empty)."""
    snippets = result.snippets
    if snippets.empty:
        return pd.DataFrame(columns=DIGEST_COLUMNS)
    keys = list(zip(snippets["role"], snippets["book"]))
    digests = {key: hashlib.sha256() for key in dict.fromkeys(keys)}
    if result.store is not None:
        for chunk in result.snippet_chunks():
            for role, book, text in zip(chunk["role"], chunk["book"], chunk["text"]):
                digests[(role, book)].update(str(text).encode("utf-8") + b"\n")
    table = (snippets.assign(label=snippets["label"].map(LABEL_NAMES).fillna(""))
             .groupby(["role", "book"], sort=False, dropna=False)
             .agg(label=("label", "first"), snippets=("snippet_id", "size"), words=("n_words", "sum")).reset_index())
    table["sha256"] = [digests[(r, b)].hexdigest() if result.store is not None else "" for r, b in
                       zip(table["role"], table["book"])]
    table["role"] = table["role"].map(lambda r: ROLE_NAMES.get(r, r))
    return table[DIGEST_COLUMNS]


def reproduce_command(result: AuditResult) -> str:
    """The `mia audit-books` line that repeats the run: its job id makes the store refuse other texts, model or
    settings (a plan mismatch), so the same command cannot silently audit something else. It names the run's
    calibration and books as they were given (a placeholder says where uploaded ones go), its store when it is not
    the default one, and an output folder named by the run."""
    run, settings = result.run, result.settings
    params = dict(settings.params)
    args = ["mia", "audit-books", "--model", run["model"], "--method", settings.method]
    if "k" in params:
        args += ["--k", str(params.pop("k"))]
    for name, value in params.items():
        args += ["--param", f"{name}={value}"]
    args += ["--snippet-words", str(settings.snippet_words)]
    if settings.max_snippets_per_book:
        args += ["--max-snippets-per-book", str(settings.max_snippets_per_book)]
    args += ["--bos", settings.bos, "--rule", settings.rule]
    if settings.rule == "fpr":
        args += ["--target-fpr", f"{settings.target_fpr:g}"]
    args += ["--seed", str(settings.seed), "--n-boot", str(settings.n_boot), "--job-id", run["run_id"]]
    if result.extraction is not None:
        x = result.extraction.settings
        args += ["--extraction", "--prefix", str(x.prefix), "--suffix", str(x.suffix), "--stride", str(x.stride),
                 "--top-k", str(x.top_k), "--temperature", f"{x.temperature:g}"]
    args += ["--calibration", settings.calibration_source or UPLOADED["calibration"],
             "--books", settings.books_source or UPLOADED["books"]]
    if result.store is not None and result.store.path.resolve() != default_store_path().resolve():
        args += ["--store", str(result.store.path)]
    return shlex.join(args + ["--output-dir", f"audit-{run['run_id']}"])


def run_facts(result: AuditResult, lm: LanguageModel | None = None) -> dict[str, str]:
    """Model, code, settings and seeds of the run, in words, for the report's provenance block."""
    run, settings = result.run, result.settings
    cap = (f"at most {settings.max_snippets_per_book:,} snippets per book, spread along it"
           if settings.max_snippets_per_book else "every full snippet of each book (no cap)")
    facts = {"run id (results store)": run["run_id"], "model spec": run["model"], "model fingerprint": run["fingerprint"]}
    if lm is not None:
        facts["model as loaded for this report"] = f"{lm.dtype} on {lm.device}, context {lm.max_length:,} tokens"
        for n, warning in enumerate(getattr(lm, "warnings", []), 1):  # a served model's (e.g. not repeatable)
            facts[f"warning {n} about this model"] = warning
    facts |= {"code version": run["code_version"], "snippets": f"{settings.snippet_words} words each; {cap}",
              "seeds": f"bootstrap and book draws: {settings.seed}", "repeat with": reproduce_command(result)}
    return facts


def provenance_html(result: AuditResult, lm: LanguageModel | None = None) -> str:
    """The report's provenance section: `run_facts`, then every book's role, counts and SHA-256 as audited."""
    def cell(value) -> str:
        return html.escape("" if pd.isna(value) else str(value), quote=True)

    facts = "".join(f"<tr><td>{cell(k)}</td><td>{cell(v)}</td></tr>" for k, v in run_facts(result, lm).items())
    head = "".join(f"<th>{h}</th>" for h in ("role", "book", "label", "snippets", "words", "SHA-256 of the text as audited"))
    rows = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>"
                   for row in book_digests(result).itertuples(index=False))
    return (f"<h2>Provenance</h2><table class='meta'>{facts}</table>"
            "<p class='note'>SHA-256 of each book's snippets' texts, in order, each followed by a newline (UTF-8): the "
            "text the scores describe (with a snippet cap, less than the whole book). Run the command above with this "
            "run's job id and the store refuses other texts, model or scoring settings.</p>"
            f"<table class='digests'><tr>{head}</tr>{rows}</table>")
