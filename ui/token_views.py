"""Methods' scores on Explore, side by side: the value and its reading, the per-token heatmap with a legend saying
what its colours and outlines mean for that method and which colour scale is on, and its details (tables, token
index lists, chosen windows). The columns are drawn row by row (values, readings, heatmaps, details), so the
heatmaps start level; a long text is shown a page of `MAX_HEATMAP_TOKENS` tokens at a time, one page selector
shared by every column, so the columns show the same tokens."""
from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

import mia_core
from mia_core.heatmap import Panel, heatmap_document, make_panel, panel_html
from mia_core.limits import MAX_HEATMAP_TOKENS, heatmap_pages
from mia_core.methods import reading
from mia_core.names import file_name
from mia_core.stamp import ResultStamp
from mia_core.token_export import token_csv
from ui.models import short_model
from ui.token_scale import SCALE_NAMES, reference_scores


def explore_panel(method: str, score: mia_core.Score, scale_how: str, reference, spec: str, bos: str,
                  params: dict) -> Panel:
    """A method's heatmap as it will be shown (`mia_core.heatmap.make_panel`), on the scale chosen on the page; the
    known non-members' token scores read here when that scale is chosen."""
    scores = reference_scores(method, scale_how, reference, spec, bos, params)
    return make_panel(method, score, scale=SCALE_NAMES[scale_how], reference_token_scores=scores,
                      reference_source=reference[1] if reference else "the known non-members")


def heatmap_page(n_tokens: int, key: str) -> tuple[int, int]:
    """The tokens to draw: all of a short text; of a long one, the page of MAX_HEATMAP_TOKENS picked in a selector."""
    pages = heatmap_pages(n_tokens)
    if len(pages) == 1:
        return pages[0]
    return st.selectbox(f"Tokens shown in every heatmap ({MAX_HEATMAP_TOKENS:,} at a time, of {n_tokens:,})", pages,
                        key=key, format_func=lambda p: f"tokens {p[0]:,}–{p[1] - 1:,}")


def draw_panels(stats, panels: list[Panel], decode, page: tuple[int, int], errors: dict[str, str] | None = None) -> None:
    """Methods side by side, row by row (so the heatmaps start level); a method that failed shows its error."""
    errors = errors or {}
    n = len(panels) + len(errors)
    if n == 0:
        return
    for row in ("value", "heatmap", "details"):
        columns = st.columns(n)
        for column, panel in zip(columns, panels):
            with column:
                if row == "value":
                    st.metric(panel.label, f"{panel.score.value:.4f}", help=mia_core.METHODS[panel.method].summary)
                    st.caption(reading(panel.method, panel.score.value))
                elif row == "heatmap":
                    st.html(panel_html(stats, panel, decode, page))
                else:
                    draw_details(stats, panel.score)
        if row == "value":
            for column, (method, message) in zip(columns[len(panels):], errors.items()):
                column.error(f"{mia_core.METHODS[method].label}: {message}")


def index_lists(details: dict) -> dict[str, list[int]]:
    """Details entries named `*_tokens` that hold scored-token positions (e.g. PAC's far and local regions)."""
    return {name: value for name, value in details.items() if name.endswith("_tokens") and isinstance(value, list)
            and all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in value)}


def regions_table(stats, score: mia_core.Score, lists: dict[str, list[int]]) -> pd.DataFrame:
    """One row per listed token: its position, text, token score and the list it is in."""
    rows = [{"region": name.removesuffix("_tokens"), "position": int(i), "token": stats.tokens[i],
             "token score": float(score.token_scores[i])} for name, positions in lists.items() for i in positions]
    return pd.DataFrame(rows).sort_values("position", kind="stable")


def windows_table(stats, score: mia_core.Score) -> pd.DataFrame:
    """Gap-K%-style chosen windows (details `window_starts`, `window`): where each starts, its tokens, its mean."""
    width = int(score.details["window"])
    values = np.asarray(score.token_scores, dtype=float)
    return pd.DataFrame([{"start": int(i), "tokens": "".join(stats.tokens[i:i + width]),
                          "mean token score": float(values[i:i + width].mean())}
                         for i in score.details["window_starts"]])


def fact(name: str, value) -> str:
    """`name: value` with floats to 4 significant digits."""
    return f"{name}: {value:.4g}" if isinstance(value, float) else f"{name}: {value}"


def draw_details(stats, score: mia_core.Score) -> None:
    """Every list of dicts as a table under its name; token index lists and chosen windows as tables of tokens;
    other entries in one caption."""
    details = score.details
    tables = {name: value for name, value in details.items()
              if isinstance(value, list) and value and all(isinstance(row, dict) for row in value)}
    lists = index_lists(details)
    windows = "window_starts" in details and "window" in details
    shown = set(tables) | set(lists) | ({"window_starts"} if windows else set())
    facts = [fact(name, value) for name, value in details.items() if name not in shown]
    if facts:
        st.caption(" · ".join(facts))
    if any(lists.values()):
        st.markdown("**tokens by region** (" + ", ".join(f"{n.removesuffix('_tokens')}: {len(v)}"
                                                         for n, v in lists.items()) + ")")
        st.dataframe(regions_table(stats, score, lists), hide_index=True)
    if windows and details["window_starts"]:
        st.markdown(f"**chosen windows** ({len(details['window_starts'])} of {details.get('n_windows', '?')}, "
                    f"{details['window']} tokens each)")
        st.dataframe(windows_table(stats, score), hide_index=True)
    for name, rows in tables.items():
        st.markdown(f"**{name}**")
        st.dataframe(pd.DataFrame(rows), hide_index=True)


def export_buttons(stats, panels: list[Panel], stamp: ResultStamp, decode) -> None:
    """Downloads of what is shown: the per-token CSV and a standalone heatmap HTML (made when clicked)."""
    if not panels:
        return
    name = file_name("tokens", short_model(stamp.model), stamp.short_hash, suffix="")
    scores = {p.method: p.score for p in panels}
    left, right = st.columns(2)
    left.download_button("Per-token table (CSV)", partial(token_csv, stats, scores, decode, stamp), f"{name}.csv", "text/csv",
                         key="explore_export_csv", on_click="ignore",
                         help="One row per token: the model, text hash and settings it was computed for, offsets, log p, "
                              "μ, σ, rank, top-1 token, and each shown method's token score and whether it entered "
                              "the sequence score.")
    right.download_button("Heatmaps (standalone HTML)", partial(heatmap_document, stats, panels, stamp, decode),
                          f"{name}.html", "text/html", key="explore_export_html", on_click="ignore",
                          help="One file with inline styles: the whole text's heatmaps, their legends, and the model, "
                               "text and settings they were computed for.")
