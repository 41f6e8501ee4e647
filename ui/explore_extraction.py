"""Explore's extraction view: can the model reproduce this text word for word? ((n,p)-discoverable extraction,
`mia_core.extract`.)

The settings (prefix, suffix, stride, top-k, temperature) are read first and the cost told before anything runs:
windows × tokens fed per window, against the bound one request may cost (`mia_core.limits`). It runs on request, in
the request's turn in the server's line (`ui.model_work`), like the other extra passes; the result is stamped with
its model, text, BOS policy and settings (`mia_core.stamp`) and greyed under a "computed for …" line once any of
them changes (`ui.stale`). Shown: the shares of windows at each p_z threshold, the text coloured by p_z with greedy
passages outlined (`mia_core.extract.render`), the longest extractable passage, the strip plot
(`mia_core.extract.figure`) and the windows as CSV.
"""
from __future__ import annotations

import math
import re
import shlex
from dataclasses import replace
from typing import NamedTuple

import streamlit as st

from mia_core.csv_safe import to_csv_safe
from mia_core.extract import ExtractionResult, ExtractionSettings, extract_texts
from mia_core.extract.figure import strip_figure
from mia_core.extract.render import extraction_html, format_pz, visible
from mia_core.extract.result import EXTRACTABLE, THRESHOLDS, WINDOW_COLUMNS
from mia_core.extract.settings import MAX_TOP_K, MAX_WINDOW_TOKENS
from mia_core.extract.windows import layout_text
from mia_core.limits import RequestTooLarge, bound_place, check_request_chars, check_request_cost, token_pass_bound
from mia_core.names import shown_name
from mia_core.stamp import ResultStamp, stamp_for
from ui.model_work import model_turn
from ui.models import cached_model
from ui.markdown import md
from ui.stale import results_container
from ui.work_estimate import device_type

#: Session key of the last extraction: (its stamp, its result).
RESULT = "explore_extraction"
TITLE = "Extraction: can the model reproduce this text word for word?"
RUN = "Run extraction"
#: Why a request is bounded, per device (`mia_core.limits`): what the bound protects.
BOUND_REASON = ("one request holds the server's model while it runs and the others wait in line, so a request may "
                "cost at most {bound:,} token-passes on {where} (about five minutes of the demo model on "
                "two CPU cores; two on a GPU)")
FACT = ("These numbers are a fact about the model under this sampling scheme (they can be checked by sampling), not "
        "a statistical inference about its training data: a passage common on the web, or formulaic, can be "
        "extractable without this text having been trained on.")


class Plan(NamedTuple):
    """What a run would do: the text's tokens, its windows and the tokens fed per window (a lead token + P + S)."""

    text_tokens: int
    windows: int
    width: int

    @property
    def token_passes(self) -> int:
        return self.windows * self.width


def settings_ui(bos: str, key: str = "explore_x") -> ExtractionSettings | None:
    """The five settings side by side (the paper's defaults) under the page's BOS policy, their widgets keyed
    `{key}_prefix` …; None, with the reason shown, when they do not validate."""
    cols = st.columns(5)
    prefix = cols[0].number_input("Prefix (tokens)", 1, MAX_WINDOW_TOKENS, 50, key=f"{key}_prefix",
                                  help="Tokens of the text the model is given before each suffix (the paper: 50).")
    suffix = cols[1].number_input("Suffix (tokens)", 1, MAX_WINDOW_TOKENS, 50, key=f"{key}_suffix",
                                  help="Tokens the model must reproduce word for word (the paper: 50).")
    stride = cols[2].number_input("Stride (tokens)", 1, MAX_WINDOW_TOKENS, 10, key=f"{key}_stride",
                                  help="Tokens between window starts: the model reads each text token "
                                       "(prefix + suffix) / stride times.")
    top_k = cols[3].number_input("Top-k", 1, MAX_TOP_K, 40, key=f"{key}_top_k",
                                 help="The k of top-k sampling (the paper: 40); greedy decoding is reported too.")
    temperature = cols[4].number_input("Temperature", 0.05, 10.0, 1.0, 0.05, key=f"{key}_temperature",
                                       help="Sampling temperature (the paper: 1).")
    try:
        return ExtractionSettings(int(prefix), int(suffix), int(stride), int(top_k), float(temperature), bos)
    except ValueError as err:
        st.error(str(err))
        return None


@st.cache_data(show_spinner=False, max_entries=64)
def plan_run(spec: str, text: str, bos: str, prefix: int, suffix: int, stride: int) -> Plan:
    """The text's windows under these settings (tokenising only: no model pass)."""
    layout = layout_text(cached_model(spec), text, ExtractionSettings(prefix, suffix, stride, bos=bos))
    return Plan(len(layout.ids), len(layout.starts), layout.fed_width)


def cost_line(plan: Plan, settings: ExtractionSettings, device: str) -> str:
    """"Cost: 37 windows × 101 tokens = 3,737 token-passes …", and whether that fits the bound (why not, when not)."""
    bound, where = token_pass_bound(device), bound_place(device)
    lead = "a lead token + " if plan.width > settings.window else ""
    line = (f"Cost before running: {plan.windows:,} windows × {plan.width:,} tokens ({lead}prefix {settings.prefix} + "
            f"suffix {settings.suffix}) = **{plan.token_passes:,} token-passes** (each window is fed on its own; "
            "windows repeated in the text are computed once)")
    if plan.token_passes <= bound:
        return line + f", within the {bound:,} one request may cost on {where}."
    return (line + f" — **over the bound, it will not run here**: {BOUND_REASON.format(bound=bound, where=where)}. "
            "Raise the stride, shorten the text, or run `mia extract` from the command line.")


def short_line(plan: Plan, settings: ExtractionSettings) -> str:
    """The sentence for a text shorter than one window."""
    return (f"The text has {plan.text_tokens:,} tokens, fewer than one window (prefix {settings.prefix} + suffix "
            f"{settings.suffix} = {settings.window} tokens): there is nothing to test. Lower the prefix and suffix, or "
            "use a longer text.")


def settings_stamp(spec: str, fingerprint: str, text: str, bos: str, settings: ExtractionSettings) -> ResultStamp:
    """The stamp of an extraction: model, text, BOS policy and the five settings that change its numbers."""
    return stamp_for(spec, fingerprint, text, bos, prefix=settings.prefix, suffix=settings.suffix,
                     stride=settings.stride, top_k=settings.top_k, temperature=settings.temperature)


def run_extraction(spec: str, text: str, bos: str, settings: ExtractionSettings, cost: int) -> None:
    """The extraction in this request's turn in the server's line, its progress shown; kept with its stamp."""
    lm = cached_model(spec)
    bar = st.progress(0.0, text="Extraction: waiting for the model …")
    with model_turn("Extraction", cost) as check:
        def progress(done: int, total: int) -> None:
            bar.progress(done / max(total, 1), text=f"Extraction: {done:,} of {total:,} distinct windows")
            check(done, total)

        result = extract_texts(lm, [text], settings, progress=progress)[0]
    bar.empty()
    st.session_state[RESULT] = (settings_stamp(spec, lm.fingerprint, text, bos, settings), result)


def whose(stamp: ResultStamp, result: ExtractionResult) -> str:
    """Which text, model and settings the numbers below belong to."""
    s = result.settings
    return (f"Extraction of “{md(shown_name(stamp.text_preview))}” ({result.n_text_tokens:,} tokens, sha256 "
            f"`{stamp.short_hash}`) under model **{md(shown_name(stamp.model))}** "
            f"(fingerprint `{stamp.fingerprint[:12]}`), "
            f"BOS policy {stamp.bos}: windows of prefix {s.prefix} + suffix {s.suffix} tokens every {s.stride} "
            f"tokens, top-{s.top_k} sampling at temperature {s.temperature:g}.")


def share_label(threshold: float) -> str:
    return {1e-3: "p_z ≥ 10⁻³", 1e-2: "p_z ≥ 10⁻²", 0.1: "p_z ≥ 0.1", 0.5: "p_z ≥ 0.5"}[threshold]


def draw_summary(result: ExtractionResult) -> None:
    """Windows tested, the share of windows at each threshold and the greedy share, with their counts."""
    n = result.n_windows
    log10_pz = result.windows["log10_pz"].to_numpy()
    counts = {t: int((log10_pz >= math.log10(t)).sum()) for t in THRESHOLDS}
    greedy = int(result.windows["greedy"].sum())
    st.markdown(f"**Share of the {n:,} windows** whose {result.settings.suffix}-token suffix the model reproduces word "
                "for word with probability p_z at least …, and by greedy decoding:")
    cols = st.columns(2 + len(THRESHOLDS))
    cols[0].metric("Windows tested", f"{n:,}")
    for col, t in zip(cols[1:], THRESHOLDS):
        col.metric(share_label(t), f"{result.share_at(t):.1%}", help=f"{counts[t]:,} of {n:,} windows")
    cols[-1].metric("Greedy", f"{result.greedy_share():.1%}", help=f"{greedy:,} of {n:,} windows")
    st.caption("Windows: " + "; ".join(f"{share_label(t)}: {counts[t]:,} of {n:,}" for t in THRESHOLDS)
               + f"; greedy decoding reproduces {greedy:,} of {n:,}.")


def longest_line(result: ExtractionResult) -> str:
    """The longest passage extractable at p_z ≥ 0.5, quoted (escaped HTML), or why there is none."""
    found = result.longest_passage()
    if found is None:
        best = float(result.windows["log10_pz"].max())
        where = f" (window {int(result.windows['log10_pz'].idxmax())})" if best > float("-inf") else \
            " (every window has a suffix token outside the top k)"
        return (f"<p>No window reached p_z ≥ {EXTRACTABLE:g}: nothing is extractable under this scheme. The highest "
                f"p_z found is {format_pz(best)}{where}.</p>")
    pieces = "one window's suffix, which comes out" if found.windows == 1 else \
        f"{found.windows} overlapping windows' suffixes, each of which comes out"
    return (f"<p><strong>Longest extractable passage</strong> ({len(result.passages())} at p_z ≥ {EXTRACTABLE:g} in "
            f"all): {found.chars:,} characters, {pieces} word for word with p_z ≥ {format_pz(found.min_log10_pz)}.</p>"
            '<blockquote class="mia-x-longest" style="white-space:pre-wrap;border-left:4px solid #238443;margin:0;'
            f'padding:0.3em 0.8em;background:#f7fcf0">{visible(result.text[found.start:found.end])}</blockquote>')


def csv_name(stamp: ResultStamp) -> str:
    """extraction-<model>-<text hash>.csv, the model's name cut to safe characters."""
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", stamp.model.rstrip("/").rsplit("/", 1)[-1]).strip("._") or "model"
    return f"extraction-{model[:40]}-{stamp.short_hash}.csv"


def windows_csv(stamp: ResultStamp, result: ExtractionResult) -> str:
    """The windows table with the model and the text's hash on every row, formula cells neutralised."""
    frame = result.windows.assign(model=shown_name(stamp.model), fingerprint=stamp.fingerprint,
                                  text_sha256=stamp.text_sha256)
    return to_csv_safe(frame[["model", "fingerprint", "text_sha256", *WINDOW_COLUMNS]])


def command_line(stamp: ResultStamp, settings: ExtractionSettings) -> str:
    """The same extraction from the command line (the text saved as text.txt)."""
    return (f"mia extract --model {shlex.quote(stamp.model)} --input text.txt --output windows.csv --prefix "
            f"{settings.prefix} --suffix {settings.suffix} --stride {settings.stride} --top-k {settings.top_k} "
            f"--temperature {settings.temperature:g} --bos {stamp.bos}")


def draw_extraction(stamp: ResultStamp, result: ExtractionResult) -> None:
    """The summary, the coloured text and its legend, the longest passage, the strip plot and the CSV."""
    st.markdown(whose(stamp, result))
    if result.n_windows == 0:
        st.info(short_line(Plan(result.n_text_tokens, 0, 0), result.settings))
        return
    st.caption(FACT)
    draw_summary(result)
    st.html(extraction_html(result, element_id="explore-extraction"))
    st.html(longest_line(result))
    st.markdown("**p_z of every window along the text**")
    st.plotly_chart(strip_figure(result), key="explore_extraction_strip")
    st.download_button("Windows (CSV)", windows_csv(stamp, result), csv_name(stamp), "text/csv",
                         key="explore_extraction_csv", on_click="ignore",
                         help="One row per window: where it lies (tokens, characters), log10 p_z, p_z, greedy, "
                              "draws needed for p = 0.5 and 0.95; the model and the text's sha256 on every row.")
    st.caption("The same extraction from the command line (the text saved as text.txt):")
    st.code(command_line(stamp, result.settings), language="bash", wrap_lines=True)


def extraction_section(spec: str | None, text: str, bos: str) -> None:
    """The extraction view: settings, the cost before running, the Run button, and the last result (greyed once the
    model, text, BOS policy or settings it was computed for change)."""
    stored = st.session_state.get(RESULT)
    with st.expander(TITLE, expanded=stored is not None):
        st.caption("How likely the model is to reproduce each passage verbatim from the passage before it "
                   "((n,p)-discoverable extraction, Hayes et al. 2024; Cooper et al. 2025): every window of prefix + "
                   "suffix tokens is fed on its own, and p_z is the probability that sampling reproduces the suffix.")
        settings = settings_ui(bos)
        if settings is not None and spec is not None and text.strip():
            offer_run(spec, text, bos, settings)
        elif settings is not None:
            st.caption("Load a model and enter a text to run an extraction.")
        stored = st.session_state.get(RESULT)
        if stored is None:
            return
        stamp, result = stored
        moved = settings is not None and replace(settings, bos=result.settings.bos) != result.settings
        also = ("the extraction settings",) if moved else ()
        with results_container(stamp, spec, text, bos, key="explore_extraction_result", button=RUN,
                               also_changed=also):
            draw_extraction(stamp, result)


def offer_run(spec: str, text: str, bos: str, settings: ExtractionSettings) -> None:
    """The cost line (or the short-text sentence) and the Run button; a press runs the extraction."""
    try:
        plan = plan_run(spec, text, bos, settings.prefix, settings.suffix, settings.stride)
    except ValueError as err:  # e.g. a tokenizer without character offsets, or a model that does not load
        st.error(str(err))
        return
    device, context = device_type(spec), cached_model(spec).max_length
    if plan.windows == 0:
        st.info(short_line(plan, settings))
        return
    if plan.width > context:
        st.error(f"A window is fed as {plan.width:,} tokens, more than this model's context of {context:,}: lower the "
                 "prefix and suffix.")
        return
    st.markdown(cost_line(plan, settings, device))
    over = plan.token_passes > token_pass_bound(device)
    if st.button(RUN, key="explore_extraction_run", disabled=over,
                 help="Runs the model on every window: it waits its turn in the server's line."):
        try:
            check_request_chars([text], "The text")
            check_request_cost(plan.token_passes, device, "This extraction")
            run_extraction(spec, text, bos, settings, plan.token_passes)
        except (RequestTooLarge, ValueError) as err:
            st.error(str(err))
