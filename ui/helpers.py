"""Helper texts on the pages: known texts that ReCaLL, Con-ReCall and CAMIA need, never the scored ones.

The Benchmark page splits them off its labelled set (or takes uploaded files); Explore takes a
built-in labelled set or uploads. `HelperTexts` and `ReferenceStats` are cached for the server, so
the work derived from them once (prefix passes, the reference population's statistics) outlives reruns.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd
import streamlit as st

import mia_core
from mia_core import datasets
from mia_core.inputs.tables import InputError, read_texts
from mia_core.methods.helper_texts import ROLES, HelperSplit, HelperTexts, ReferenceStats, split_helpers
from mia_core.api import HELPER_NEEDS
from mia_core.scoring import reference_stats
from ui.jobs import public_message
from ui.model_work import model_slot
from ui.models import cached_model

#: File types a helper-text upload may have (a `text` column, one text per row).
UPLOAD_TYPES = ["csv", "tsv", "jsonl", "json"]
#: The methods' parameter that says how many prefix shots they take (the split takes off as many).
SHOTS = "n_shots"


def read_upload(upload, read: Callable[[Path], pd.DataFrame]) -> pd.DataFrame:
    """An uploaded file parsed by `read` from a temporary copy under its own name (errors: `InputError`, naming the
    upload, never the server's temporary folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(upload.name).name
        path.write_bytes(upload.getvalue())
        try:
            return read(path)
        except InputError as err:
            raise InputError(public_message(str(err).replace(str(path), path.name))) from None


def helper_roles(methods: Sequence[str]) -> list[str]:
    """The helper roles the methods need, in registry order."""
    return [r for r in HELPER_NEEDS if any(r in mia_core.METHODS[m].needs for m in methods)]


def missing_roles(method: str, available: Sequence[str]) -> list[str]:
    """The helper roles `method` needs that are not `available`."""
    return [r for r in HELPER_NEEDS if r in mia_core.METHODS[method].needs and r not in available]


def needs_line(method: str, roles: Sequence[str]) -> str:
    """"ReCaLL: known non-members (prefix shots)": what a method is waiting for."""
    return f"{mia_core.METHODS[method].label}: " + " and ".join(ROLES[r] for r in roles)


@st.cache_data(show_spinner=False, max_entries=4)
def builtin_set(name: str) -> pd.DataFrame:
    """A built-in labelled set (rebuilt from installed packages once per server)."""
    return datasets.load(name)


@st.cache_resource(show_spinner=False, max_entries=32)
def cached_helpers(role: str, texts: tuple[str, ...], source: str) -> HelperTexts:
    """One `HelperTexts` per (role, texts, source) for the server: its memo of prefix passes outlives reruns."""
    return HelperTexts(texts, role, source=source)


@st.cache_resource(show_spinner=False, max_entries=8)
def cached_reference(spec: str, bos: str, texts: tuple[str, ...], source: str) -> ReferenceStats:
    """The reference population's statistics under a model and BOS policy, computed once (CAMIA then costs nothing),
    in its turn in the server's line for model work."""
    lm = cached_model(spec)
    with model_slot():
        return reference_stats(lm, cached_helpers("reference", texts, source), bos=bos)


def upload_ui(roles: Sequence[str], key: str) -> dict[str, tuple[tuple[str, ...], str]]:
    """A file of known texts per role → {role: (texts, file name)}; roles without a (readable) file are left out."""
    out = {}
    for role in roles:
        upload = st.file_uploader(f"Known texts: {ROLES[role]} (a `text` column)", type=UPLOAD_TYPES,
                                  key=f"{key}_{role}")
        if upload is None:
            continue
        try:
            texts = read_upload(upload, read_texts)["text"].tolist()
        except InputError as err:
            st.error(str(err))
            continue
        out[role] = (tuple(texts), upload.name)
    return out


@dataclass
class BenchmarkHelpers:
    """What the Benchmark page passes to `evaluate_methods` for helper texts."""

    roles: list[str] = field(default_factory=list)
    split: HelperSplit | None = None
    inputs: dict[str, HelperTexts] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        """A split, or a file for every role."""
        return self.split is not None or all(r in self.inputs for r in self.roles)

    def scored(self, data: pd.DataFrame) -> pd.DataFrame:
        """The rows of `data` that `evaluate_methods` scores: all, or those its seeded helper split leaves."""
        if self.split is None:
            return data
        return data.iloc[split_helpers(data["label"].to_numpy(), self.roles, self.split)["scored"]].reset_index(drop=True)


def benchmark_helpers_ui(methods: Sequence[str], values: dict[str, dict]) -> BenchmarkHelpers:
    """The "Helper texts" section, shown when a chosen method needs known texts: split them off (as many prefix shots
    as the methods' `n_shots` in `values`, their drawn parameters), or upload them."""
    roles = helper_roles(methods)
    if not roles:
        return BenchmarkHelpers()
    st.markdown("**Helper texts** (known texts a method compares with, never scored) — " + "; ".join(
        needs_line(m, missing_roles(m, ())) for m in methods if missing_roles(m, ())) + ".")
    split = st.radio("Helper texts from", ["Split off this labelled set", "Upload files of known texts"],
                     horizontal=True, key="bench_helper_source", label_visibility="collapsed") != \
        "Upload files of known texts"
    n_shots = int(next((v[SHOTS] for v in values.values() if SHOTS in v), HelperSplit.n_shots))
    shown = [name for name, on in (("fraction", split and "reference" in roles), ("seed", split)) if on]
    column = dict(zip(shown, st.columns(len(shown)))) if shown else {}  # only the inputs that apply, side by side
    if not split:
        files = upload_ui(roles, "bench_helper")
        inputs = {role: HelperTexts(texts, role, source=name) for role, (texts, name) in files.items()}
        missing = [ROLES[r] for r in roles if r not in inputs]
        if missing:
            st.caption("Still to upload: " + "; ".join(missing) + ". They must not be among the labelled texts.")
        return BenchmarkHelpers(roles, None, inputs)
    fraction = column["fraction"].slider("Reference fraction (of the non-members)", 0.05, 0.9, 0.3, 0.05,
                                         key="bench_ref_fraction", help="CAMIA's authors use 30%.") \
        if "fraction" in column else HelperSplit.reference_fraction
    seed = column["seed"].number_input("Split seed", 0, 1_000_000, 0, 1, key="bench_helper_seed")
    st.caption("A seeded split takes these helper texts out of the labelled set: these rows are scored by no method, "
               "so every method is compared on the same remaining texts.")
    return BenchmarkHelpers(roles, HelperSplit(n_shots, float(fraction), int(seed)), {})


def helpers_note(record: dict) -> str:
    """Where a run's helper texts came from (report["helpers"]), as markdown lines."""
    lines = [f"- {ROLES[role]}: **{r['n']}** text{'' if r['n'] == 1 else 's'}, {r['source']}"
             for role, r in record.items() if role != "split"]
    return "**Helper texts** (scored by no method):\n" + "\n".join(lines)


def explore_helpers_ui(excluded: set[str]) -> dict[str, tuple[tuple[str, ...], str]]:
    """Known texts for the helper methods on Explore: none, a built-in labelled set, or uploads → {role: (texts,
    source)}; never a text in `excluded` (the explored one)."""
    how = st.radio("Helper texts: known texts that ReCaLL, Con-ReCall and CAMIA compare with",
                   ["None", "A built-in labelled set", "Upload files"], horizontal=True, key="explore_helper_source")
    if how == "None":
        return {}
    if how == "Upload files":
        chosen = upload_ui(HELPER_NEEDS, "explore_helper")
    else:
        c1, c2 = st.columns(2)
        name = c1.selectbox("Set", [d["name"] for d in datasets.list_datasets()], key="explore_helper_set")
        n = int(c2.number_input("Known texts per class (a seeded sample)", 5, 240, 40, 5, key="explore_helper_n"))
        sample = datasets.sample_per_class(builtin_set(name), n)
        non, mem = (tuple(sample.loc[sample["label"] == y, "text"]) for y in (0, 1))
        where = f"{name}, seeded sample of {n} per class"
        chosen = {"shots_nonmembers": (non, f"{where}: non-members"), "shots_members": (mem, f"{where}: members"),
                  "reference": (non, f"{where}: non-members")}
        st.caption(f"{datasets.DESCRIPTIONS[name]}. Its non-members are the non-member prefix and CAMIA's reference "
                   "population; its members are Con-ReCall's member prefix.")
    out, dropped = {}, False
    for role, (texts, source) in chosen.items():
        kept = tuple(t for t in texts if t not in excluded)
        dropped |= len(kept) < len(texts)
        if kept:
            out[role] = (kept, source)
    if dropped:
        st.caption("The text being explored is one of these known texts: it is left out of them (a helper text "
                   "is never the scored text).")
    return out


def helper_inputs(method: str, chosen: dict[str, tuple[tuple[str, ...], str]], spec: str, bos: str) -> dict:
    """The helper-text inputs of `score` for one method: cached `HelperTexts`, or the cached `ReferenceStats`."""
    out = {}
    for role in missing_roles(method, ()):
        texts, source = chosen[role]
        out[role] = cached_reference(spec, bos, texts, source) if role == "reference" else \
            cached_helpers(role, texts, source)
    return out
