"""The `mia` command line: a real run on a tiny saved model, and the bad-input table."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mia_core import load_frequency_table, load_model, metrics, score_texts

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts, tiny_tokenizer


def test_score_writes_one_row_per_text(model_dir, tmp_path):
    texts = random_texts(4, seed=1)
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps({"id": f"t{i}", "body": t}) for i, t in enumerate(texts)))
    code, _, err = run_cli("score", "--model", model_dir, "--input", src, "--output", tmp_path / "s.csv",
                           "--text-column", "body", "--methods", "loss,min_k_pp", "--k", "0.5")
    assert code == 0, err
    got = pd.read_csv(tmp_path / "s.csv")
    assert list(got.columns) == ["id", "n_tokens", "long_text", "loss", "min_k_pp"]
    expected = score_texts(load_model(str(model_dir)), texts, ["loss", "min_k_pp"], k=0.5)
    np.testing.assert_allclose(got[["loss", "min_k_pp"]].to_numpy(), expected.to_numpy(), rtol=1e-6)
    assert got["id"].tolist() == ["t0", "t1", "t2", "t3"]


def test_eval_writes_metrics_json(model_dir, tmp_path):
    texts = random_texts(20, seed=2)
    labels = [1, 0] * 10
    src = tmp_path / "in.csv"
    pd.DataFrame({"text": texts, "member": labels}).to_csv(src, index=False)
    code, out, err = run_cli("eval", "--model", model_dir, "--input", src, "--label-column", "member",
                             "--methods", "loss,zlib", "--output", tmp_path / "m.json", "--n-boot", "200")
    assert code == 0, err
    report = json.loads((tmp_path / "m.json").read_text())
    scores = score_texts(load_model(str(model_dir)), texts, ["loss"])["loss"]
    assert report["loss"]["auroc"] == pytest.approx(metrics.auroc(labels, scores))
    lo, hi = report["loss"]["auroc_ci"]
    assert lo <= report["loss"]["auroc"] <= hi
    assert {"tpr@5%fpr", "tpr@1%fpr", "fpr@95%tpr"} <= set(report["zlib"])
    assert 0 <= report["blind_baseline"]["auroc"] <= 1
    assert report["n_members"] == report["n_nonmembers"] == 10
    assert "AUROC" in out and "blind" in out


def test_freq_build_counts_the_corpus(model_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(random_texts(30, seed=3)))
    code, _, err = run_cli("freq", "build", "--model", model_dir, "--corpus", corpus, "--output", tmp_path / "f.npz")
    assert code == 0, err
    tok = tiny_tokenizer(300)
    table = load_frequency_table(tmp_path / "f.npz", tok)
    expected = sum(len(tok(line, add_special_tokens=False)["input_ids"]) for line in corpus.read_text().splitlines())
    assert table.total == expected and table.counts.shape == (300,)


def _bad_inputs(tmp: Path) -> list[tuple[str, list[str], str]]:
    (tmp / "empty.csv").write_text("")
    (tmp / "binary.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp / "nocol.csv").write_text("body,label\nhello,1\nbye,0\n")
    (tmp / "badlabels.csv").write_text("text,label\nhello,1\nbye,2\n")
    (tmp / "oneclass.csv").write_text("text,label\nhello,1\nbye,1\n")
    (tmp / "ok.csv").write_text("text,label\nhello,1\nbye,0\n")
    out = ["--output", str(tmp / "o.csv")]
    return [
        ("missing file", ["score", "--input", str(tmp / "nope.csv"), *out], "nope.csv"),
        ("empty file", ["score", "--input", str(tmp / "empty.csv"), *out], "empty.csv"),
        ("binary file", ["score", "--input", str(tmp / "binary.csv"), *out], "binary.csv"),
        ("undecodable", ["score", "--input", str(tmp / "latin1.txt"), *out], "latin1.txt"),
        ("no text column", ["score", "--input", str(tmp / "nocol.csv"), *out], "--text-column"),
        ("labels not 0/1", ["eval", "--input", str(tmp / "badlabels.csv"), *out], "badlabels.csv"),
        ("one class", ["eval", "--input", str(tmp / "oneclass.csv"), *out], "only one class"),
        ("unknown method", ["score", "--input", str(tmp / "ok.csv"), "--methods", "minkpp", *out], "available"),
        ("missing model", ["score", "--input", str(tmp / "ok.csv"), "--model", str(tmp / "no-model"), *out], "not found"),
    ]


@pytest.mark.parametrize("case", range(9))
def test_bad_input_is_one_line_exit_2(case, tmp_path):
    name, args, needle = _bad_inputs(tmp_path)[case]
    if "--model" not in args:
        args = [args[0], "--model", "demo", *args[1:]]
    code, out, err = run_cli(*args)
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("loading model")]
    assert code == 2, (name, err)
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], (name, err)
    assert "Traceback" not in err + out


def test_console_script_exits_2_without_traceback(tmp_path):
    exe = Path(sys.executable).with_name("mia")
    result = subprocess.run([str(exe), "score", "--model", "demo", "--input", str(tmp_path / "x.csv"),
                             "--output", str(tmp_path / "o.csv")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: ") and "x.csv" in result.stderr
    assert "Traceback" not in result.stderr


def test_nan_metrics_are_written_as_null(model_dir, tmp_path):
    src = tmp_path / "tiny.csv"
    pd.DataFrame({"text": random_texts(4, seed=8), "label": [1, 0, 0, 0]}).to_csv(src, index=False)
    code, _, err = run_cli("eval", "--model", model_dir, "--input", src, "--methods", "loss,loss",
                           "--output", tmp_path / "m.json", "--n-boot", "200")
    assert code == 0, err
    text = (tmp_path / "m.json").read_text()
    assert "NaN" not in text and json.loads(text)["blind_baseline"]["auroc"] is None


@pytest.mark.parametrize("option, value, needle", [("--k", "0", "k must be in"), ("--bos", "bos", "--bos"),
                                                   ("--long-text", "cut", "--long-text")])
def test_bad_options_fail_before_loading_a_model(option, value, needle, tmp_path):
    src = tmp_path / "ok.csv"
    src.write_text("text\nhello\n")
    code, _, err = run_cli("score", "--model", "no-such-model-anywhere", "--input", src, "--output", tmp_path / "o.csv",
                           option, value)
    assert code == 2 and needle in err and "loading model" not in err


def test_unknown_option_is_a_usage_error_not_a_traceback():
    code, _, err = run_cli("eval", "--bogus")
    assert code == 2 and "No such option: --bogus" in err and "Traceback" not in err
    code, _, err = run_cli("score", "--model", "x", "--input", "y", "--output", "z", "--methods", "min_kpp")
    assert code == 2 and "did you mean 'min_k_pp'" in err
