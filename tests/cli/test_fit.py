"""`mia fit` and `mia eval --fit`: supervised methods found in the registry, never named by the command line; each
one chosen gets exactly one fit. (The full fit → score → eval round trip is in tests/methods/test_gds.py.)"""
from __future__ import annotations

import pandas as pd
import pytest

from mia_core.methods import METHODS

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts

SUPERVISED = [name for name, spec in METHODS.items() if spec.supervised is not None]


@pytest.fixture
def labelled(tmp_path):
    src = tmp_path / "labelled.csv"
    pd.DataFrame({"text": random_texts(12, seed=9), "label": [1, 0] * 6}).to_csv(src, index=False)
    return src


def last_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("loading model")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_fit_refuses_a_method_that_is_not_supervised_and_lists_those_that_are(labelled, tmp_path):
    assert SUPERVISED  # the registry has at least one
    code, _, err = run_cli("fit", "--model", "no-such-model", "--method", "min_k", "--input", labelled,
                           "--output", tmp_path / "fit")
    assert code == 2
    assert last_error(err) == f"error: method min_k is not supervised; the supervised methods: {', '.join(SUPERVISED)}"
    code, _, err = run_cli("fit", "--model", "no-such-model", "--method", SUPERVISED[0], "--input", labelled,
                           "--output", tmp_path / "fit", "--train-fraction", "1")
    assert code == 2 and last_error(err) == "error: --train-fraction must be in (0, 1) (got 1.0)"


def test_eval_fit_needs_a_supervised_method_and_a_supervised_method_needs_one_fit(labelled, tmp_path):
    common = ["eval", "--model", "no-such-model", "--input", labelled, "--output", tmp_path / "m.json"]
    code, _, err = run_cli(*common, "--methods", "loss,zlib", "--fit", "0.5")
    assert code == 2 and last_error(err) == (f"error: --fit fits the chosen supervised methods, and none of loss, zlib "
                                             f"is one (supervised: {', '.join(SUPERVISED)})")
    method = SUPERVISED[0]
    fits = METHODS[method].supervised.fits
    code, _, err = run_cli(*common, "--methods", f"loss,{method}")
    assert code == 2 and last_error(err) == (f"error: {method} learns from labelled texts: fit it here with --fit "
                                             f"FRACTION, or give it a fit saved by mia fit with --param {fits}=FOLDER")
    saved = tmp_path / "saved-fit"
    saved.mkdir()
    code, _, err = run_cli(*common, "--methods", method, "--fit", "0.5", "--param", f"{fits}={saved}")
    assert code == 2 and last_error(err) == f"error: --fit and --param {fits}=… both give {method} a fit; choose one"
    code, _, err = run_cli(*common, "--methods", method, "--param", f"{fits}={tmp_path / 'nowhere'}")
    assert code == 2 and "no such folder" in last_error(err) and f"mia fit --method {method}" in err
    code, _, err = run_cli("score", "--model", "no-such-model", "--input", labelled, "--output", tmp_path / "s.csv",
                           "--methods", method)
    assert code == 2 and last_error(err) == (f"error: {method} learns from labelled texts: give it a fit saved by "
                                             f"mia fit with --param {fits}=FOLDER")
