"""The Benchmark page's labelled data: a built-in demo set (its sample size kept while another source is shown), an
uploaded file with column pickers filled from its own header, or a hub benchmark; errors worded for the page."""
from __future__ import annotations

import re
from typing import Sequence

import pandas as pd
import streamlit as st

from mia_core import datasets
from mia_core.inputs.benchmarks import BENCHMARKS, load_benchmark
from mia_core.inputs.tables import InputError, read_labelled, read_table
from ui.helpers import read_upload
from ui.jobs import public_message
from ui.places import BENCH_N, BENCH_SOURCE, dataset_names

#: The default texts per class of a built-in set, and the session key keeping the chosen number across sources.
DEFAULT_PER_CLASS, KEPT_N = 60, "bench_n_kept"
#: "…; choose one with --text-column" (the CLI's hint) → the page's own words.
_FLAG_HINT = re.compile(r"choose one with --(text|label)-column")


def page_error(err: Exception) -> str:
    """An input error as the page says it: file names without server folders, the column menus instead of CLI flags."""
    return _FLAG_HINT.sub(lambda m: f"pick the {m.group(1)} column in the menu above", public_message(str(err)))


@st.cache_data(show_spinner=False, max_entries=8)
def upload_columns(name: str, data: bytes) -> list[str]:
    """The column names of an uploaded table, read once per file (its errors: `InputError`)."""
    return [str(c) for c in read_upload(_Upload(name, data), read_table).columns]


@st.cache_data(show_spinner=False, max_entries=8)
def upload_labelled(name: str, data: bytes, text_column: str, label_column: str) -> pd.DataFrame:
    """An uploaded table as labelled texts (id, text, label) with the chosen columns (its errors: `InputError`)."""
    return read_upload(_Upload(name, data), lambda path: read_labelled(path, text_column=text_column,
                                                                       label_column=label_column))


class _Upload:
    """The name and bytes of an upload, as `read_upload` reads them (cached functions take plain values)."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self._data = name, data

    def getvalue(self) -> bytes:
        return self._data


def default_index(columns: Sequence[str], wanted: str, avoid: str | None = None) -> int:
    """The position of `wanted` among the columns, else of the first column that is not `avoid`."""
    if wanted in columns:
        return list(columns).index(wanted)
    return next((i for i, c in enumerate(columns) if c != avoid), 0)


def builtin_ui() -> tuple[str, pd.DataFrame, int]:
    """A seeded sample of a built-in set; the number per class survives switching to another source and back."""
    name = st.selectbox("Set", dataset_names(), key="bench_set")
    per_class = int(st.number_input("Texts per class (a seeded sample; fewer = faster)", int(BENCH_N.low),
                                    int(BENCH_N.high), int(st.session_state.get(KEPT_N, DEFAULT_PER_CLASS)), 5,
                                    key=BENCH_N.key))
    st.session_state[KEPT_N] = per_class  # a widget not drawn loses its value: this copy brings it back
    st.caption(f"{datasets.DESCRIPTIONS[name]}. A random split: the blind baseline should sit near 0.5.")
    return name, datasets.sample_per_class(datasets.load(name), per_class), per_class


def upload_ui() -> tuple[str, pd.DataFrame | None]:
    """An uploaded labelled file; its text and label columns are picked from the file's own header."""
    upload = st.file_uploader("Labelled file (1 = member, 0 = non-member)", type=["csv", "tsv", "jsonl", "json"],
                              key="bench_upload")
    if upload is None:
        return "", None
    try:
        columns = upload_columns(upload.name, upload.getvalue())
    except InputError as err:
        st.error(page_error(err))
        return "", None
    c1, c2 = st.columns(2)
    text_col = c1.selectbox("Text column", columns, index=default_index(columns, "text"), key="bench_text_col")
    label_col = c2.selectbox("Label column (1 = member, 0 = non-member)", columns,
                             index=default_index(columns, "label", avoid=text_col), key="bench_label_col")
    st.session_state["bench_columns"] = {"text_column": text_col, "label_column": label_col}
    try:
        return upload.name, upload_labelled(upload.name, upload.getvalue(), text_col, label_col)
    except InputError as err:
        st.error(page_error(err))
        return "", None


def hub_ui() -> tuple[str, pd.DataFrame | None]:
    """A public benchmark loaded from the hub on request (kept in the session once loaded)."""
    name = st.selectbox("Benchmark", list(BENCHMARKS), key="bench_hub")
    spec = BENCHMARKS[name]
    st.caption(f"{spec.description}. **Caution:** {spec.caution}. Licence: {spec.licence}. "
               f"Source: {spec.repo or 'not on the hub, local files only: ' + spec.home}. {spec.citation}.")
    if not st.button("Load from the hub", key="bench_hub_load"):
        return st.session_state.get("bench_hub_data", ("", None))
    try:
        with st.spinner(f"Downloading {name} …"):
            data = (name, load_benchmark(name))
    except Exception as err:  # offline, gated, renamed: say so, keep the page alive
        first = (str(err).splitlines() or [type(err).__name__])[0]
        st.error(f"Could not load {name} from the hub: {public_message(first)}")
        return "", None
    st.session_state["bench_hub_data"] = data
    return data


def data_ui() -> tuple[str, pd.DataFrame | None, int | None]:
    """The labelled data (name, table, texts per class of a sampled built-in set): a demo set, a file, or a hub set."""
    builtin, upload, _ = BENCH_SOURCE.options
    source = st.radio("Data", BENCH_SOURCE.options, horizontal=True, key=BENCH_SOURCE.key)
    st.session_state["bench_columns"] = {}  # the upload's column names, when a file is the source
    if source == builtin:
        return builtin_ui()
    if source == upload:
        return (*upload_ui(), None)
    return (*hub_ui(), None)
