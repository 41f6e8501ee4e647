"""`mia heatmap` writes, byte for byte, the file Explore's "Heatmaps (standalone HTML)" download gives for the same
text, model, methods and settings (the page's own functions build the expected file); bad requests fail in one line
before a model is loaded."""
from __future__ import annotations

import pytest

from mia_core import METHODS, load_model, score
from mia_core.heatmap import heatmap_document
from mia_core.inputs.documents import document_text
from mia_core.stamp import stamp_for
from ui.token_scale import FIXED, THIS_TEXT
from ui.token_views import explore_panel

from tests.support.cli_runner import run_cli

TEXT = 'The river <b>castle</b> & the "engine" of the north.\n\n  Ancient silver was painted quietly.\n'


def page_download(model: str, text: str, methods: list[str], k: float, scale_how: str) -> bytes:
    """What Explore's download holds: statistics-only methods scored from the statistics, those that run the model
    again with `lm=`, each panel made as the page makes it (no reference texts), the stamp with k."""
    lm = load_model(model)
    stats = lm.token_stats([text], bos="auto")[0]
    panels = []
    for method in methods:
        params = {"k": k} if "k" in METHODS[method].param_names else {}
        if METHODS[method].stats_only:
            panels.append(explore_panel(method, score(method, stats, **params), scale_how, None, model, "auto",
                                        params))
        else:
            panels.append(explore_panel(method, score(method, stats, lm=lm, **params), scale_how, None, model,
                                        "auto", {}))
    stamp = stamp_for(model, lm.fingerprint, text, "auto", k=k)
    return heatmap_document(stats, panels, stamp, lm.tokenizer.decode).encode("utf-8")


@pytest.mark.parametrize("scale, scale_how", [("fixed", FIXED), ("text", THIS_TEXT)])
def test_heatmap_command_writes_the_pages_download(model_dir, tmp_path, scale, scale_how):
    source = tmp_path / "text.txt"
    source.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "h.html"
    methods = ["min_k_pp", "loss", "infilling"]  # infilling runs the model again (no fixed range: the text's)
    code, _, err = run_cli("heatmap", "--model", model_dir, "--input", source, "--methods", ",".join(methods),
                           "--output", out, "--k", "0.3", "--scale", scale)
    assert code == 0, err
    assert "wrote 3 heatmaps" in err
    uploaded = document_text("text.txt", TEXT.encode())  # the text as the page reads the same file uploaded
    expected = page_download(str(model_dir), uploaded, methods, 0.3, scale_how)
    assert out.read_bytes() == expected
    page = out.read_text(encoding="utf-8")
    assert "&lt;b&gt;castle" in page and "<b>castle" not in page and "k 0.3" in page
    note = "fixed for Min-K%++: -3 to 1" if scale == "fixed" else "this text: its 5th–95th percentile"
    assert f"Scale: {note}." in page


@pytest.mark.parametrize("args, needle", [
    (["--methods", "ref"], "method ref needs more than the model (extra model)"),
    (["--methods", "loss,dc_pdd"], "method dc_pdd needs more than the model (frequency table)"),
    (["--methods", "nope"], "nope"),
    (["--scale", "reference"], "--scale must be one of fixed, text (got 'reference')"),
    (["--param", "k=0.5"], "give k with --k"),
    (["--methods", "zlib", "--param", "m=5"], "--param m: none of the chosen methods (zlib) takes a parameter"),
    (["--k", "2"], "k must be in (0, 1]"),
])
def test_bad_requests_fail_in_one_line_before_loading(args, needle, tmp_path):
    source = tmp_path / "text.txt"
    source.write_text(TEXT, encoding="utf-8")
    code, _, err = run_cli("heatmap", "--model", "no-such-model", "--input", source, "--output", tmp_path / "h.html",
                           *args)
    assert code == 2 and needle in err and "loading model" not in err, err
    assert not (tmp_path / "h.html").exists()


def test_input_must_be_one_document(model_dir, tmp_path):
    code, _, err = run_cli("heatmap", "--model", model_dir, "--input", tmp_path, "--output", tmp_path / "h.html")
    assert code == 2 and f"error: --input must be a .txt/.md/.pdf/.epub file: {tmp_path} is a folder" in err
    table = tmp_path / "texts.csv"
    table.write_text("text\na\n")
    code, _, err = run_cli("heatmap", "--model", model_dir, "--input", table, "--output", tmp_path / "h.html")
    assert code == 2 and "texts.csv: unsupported file type" in err
