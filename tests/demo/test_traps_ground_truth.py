"""Extraction's ground truth on the real demo: under demo-traps, trap passages seen 100 times are extractable, 10 times
partly, once or never not; the base model extracts none; greedy decoding agrees with every greedy flag."""
from __future__ import annotations

import json

import pytest
import torch

from mia_core import load_model
from mia_core.demo.traps import load_traps, trap_passages
from mia_core.extract import ExtractionSettings, extract_texts
from mia_core.model.builtin import demo_traps_dir

#: One worker: `under` extracts every trap passage under two real models (20 s alone; each worker paid 38-40 s for it)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("demo_traps")]


@pytest.fixture(scope="module")
def traps():
    folder = demo_traps_dir()
    return trap_passages(load_traps(folder), json.loads((folder / "manifest.json").read_text()))


@pytest.fixture(scope="module")
def under(traps):
    """Each model's extraction of every trap passage at the paper's settings (50 + 50 tokens, top-40, T = 1)."""
    settings = ExtractionSettings(stride=10)
    models = {name: load_model(name, device="cpu") for name in ("demo-traps", "demo")}
    return models, {name: extract_texts(lm, traps["text"].tolist(), settings, cache=False) for name, lm in models.items()}


def test_exposure_orders_extraction_under_demo_traps(traps, under):
    results = under[1]["demo-traps"]
    for source in ("demo-wiki", "demo-books"):
        best = {row.exposure: results[i].windows["log10_pz"].max() for i, row in traps.iterrows() if row.source == source}
        by_exposure = {row.exposure: results[i] for i, row in traps.iterrows() if row.source == source}
        assert by_exposure[100].share_at(0.5) > 0 and by_exposure[100].greedy_share() >= 0.5  # extractable
        assert best[100] > best[10] > max(best[1], best[0])  # 10×: partly, below 100×
        assert by_exposure[10].greedy_share() > 0
        for seen in (1, 0):  # once (its member text) or never (held out): nothing comes out
            assert by_exposure[seen].share_at(1e-3) == 0 and by_exposure[seen].greedy_share() == 0


def test_the_base_model_extracts_none_of_them(traps, under):
    for result in under[1]["demo"]:
        assert result.share_at(1e-3) == 0 and result.greedy_share() == 0 and result.n_windows >= 4


def test_greedy_decoding_reproduces_exactly_the_flagged_windows(traps, under):
    models, results = under
    lm = models["demo-traps"]
    lead = lm.fed_ids("", "auto")
    s = results["demo-traps"][0].settings
    windows = []  # (the window's true suffix, its greedy flag, its fed prefix) of every window of the 10× and 100× traps
    for (_, row), result in zip(traps.iterrows(), results["demo-traps"]):
        if row.exposure < 10:
            continue
        ids = lm.tokenizer(row.text)["input_ids"]
        for a, greedy in zip(result.windows["token_start"].tolist(), result.windows["greedy"].tolist()):
            windows.append((ids[a + s.prefix : a + s.window], bool(greedy), lead + ids[a : a + s.prefix]))
    # every prefix has the same length: one batch, no padding (a batch per trap decoded 2.4× slower on 2 cores)
    prefixes = torch.tensor([prefix for _, _, prefix in windows])
    out = lm.model.generate(prefixes, attention_mask=torch.ones_like(prefixes), do_sample=False,
                            max_new_tokens=s.suffix, min_new_tokens=s.suffix, pad_token_id=0)
    checked = {True: 0, False: 0}
    for (suffix, greedy, _), generated in zip(windows, out[:, prefixes.shape[1]:].tolist(), strict=True):
        assert (generated == suffix) == greedy
        checked[greedy] += 1
    assert checked[True] >= 5 and checked[False] >= 5  # both kinds checked
