"""`windows="reference"`: Cooper et al.'s windows and greedy rule (pasta41/book-extraction-science @ 7720bceb) against
hand-counted windows, hand-made ties at the top, and a float64 recomputation written here from their code's steps."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from mia_core import LanguageModel
from mia_core.extract import ExtractionSettings, extract_texts
from mia_core.extract.reduce import top_ties
from mia_core.extract.reference import reference_layout
from mia_core.extract.result import greedy_columns
from mia_core.extract.windows import layout_text
from mia_core.model.encoding import encode_texts
from mia_core.model.stats_cache import StatsCache

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts, save_tiny_model, tiny_llama, tiny_tokenizer

#: 30 distinct four-letter words: with one space each, word i starts at character 5·i.
WORDS = [f"w{i:03d}" for i in range(30)]
TEXT = " ".join(WORDS)
BOS = 0
#: Text for the recomputation: long enough for a few dozen 112-character slices.
LONG = " ".join(random_texts(3, seed=21, min_words=30, max_words=34))


def with_bos(backend: Tokenizer, **special: str) -> PreTrainedTokenizerFast:
    """The tokenizer with a template putting `<|endoftext|>` first, as a Llama tokenizer puts its BOS."""
    backend = Tokenizer.from_str(backend.to_str())
    backend.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A",
                                                           special_tokens=[("<|endoftext|>", BOS)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>", **special)


def word_lm(tmp_path) -> LanguageModel:
    """A tiny Llama over one token per word of `WORDS` ([UNK] for a piece of one), BOS first."""
    vocab = {"<|endoftext|>": BOS, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = with_bos(backend, unk_token="[UNK]")
    return LanguageModel(tiny_llama(len(vocab)), tok, name="words", stats_cache=StatsCache(tmp_path / "stats"))


def word_id(lm: LanguageModel, i: int) -> int:
    return lm.tokenizer.convert_tokens_to_ids(WORDS[i])


def their_windows(tok, text: str, width: int, stride: int) -> list[tuple[int, list[int]]]:
    """(first character, ids) of each window as their `book_text_to_sliding_window_token_chunks` and
    `load_book_sliding` make them: a slice of 8·width characters every `stride` characters, tokenised with its
    special tokens, its first `width` ids if it has that many, a repeat of an earlier window dropped."""
    seen, out = set(), []
    for cut in range(0, len(text), stride):
        ids = tok(text[cut : cut + 8 * width])["input_ids"]
        if len(ids) >= width and tuple(ids[:width]) not in seen:
            seen.add(tuple(ids[:width]))
            out.append((cut, ids[:width]))
    return out


def test_reference_windows_by_hand_beside_ours(tmp_path):
    lm = word_lm(tmp_path)
    whole = encode_texts(lm.tokenizer, [TEXT], arrays=True)[0]
    ref = reference_layout(lm, TEXT, whole, ExtractionSettings(prefix=3, suffix=2, stride=10, windows="reference"))
    # a cut every 10 characters = every 2nd word; 4 text tokens after the BOS, so words 0, 2, …, 26 start one
    firsts = list(range(0, 27, 2))
    assert ref.n_windows == len(firsts) == 14 and ref.fed_width == 5 and ref.prefix_text_tokens == 2
    assert ref.all_fed().tolist() == [[BOS] + [word_id(lm, i + j) for j in range(4)] for i in firsts]
    spans = ref.spans()  # the prefix is BOS + words i, i+1; the suffix words i+2, i+3
    assert spans["token_start"].tolist() == firsts
    assert spans["char_start"].tolist() == [5 * i for i in firsts]
    assert spans["suffix_char_start"].tolist() == [5 * (i + 2) for i in firsts]
    assert spans["char_end"].tolist() == [5 * (i + 3) + 4 for i in firsts]
    ours = layout_text(lm, TEXT, ExtractionSettings(prefix=3, suffix=2, stride=10))
    # ours: 10 *tokens* apart plus the window at the end, BOS before 3 + 2 text tokens
    assert ours.starts.tolist() == [0, 10, 20, 25] and ours.fed_width == 6 and ours.prefix_text_tokens == 3
    assert ours.all_fed()[0].tolist() == [BOS] + [word_id(lm, j) for j in range(5)]


def test_reference_slices_are_retokenised_and_repeats_dropped(tmp_path):
    lm = word_lm(tmp_path)
    s = ExtractionSettings(prefix=3, suffix=2, stride=7, windows="reference")
    ref = reference_layout(lm, TEXT, encode_texts(lm.tokenizer, [TEXT], arrays=True)[0], s)
    # the cut at character 7 falls inside word 1: its tail "01" is a token of its own ([UNK]), then words 2, 3, 4
    assert ref.all_fed()[1].tolist() == [BOS, 1, word_id(lm, 2), word_id(lm, 3), word_id(lm, 4)]
    assert ref.spans()["char_start"][1] == 7 and ref.spans()["token_start"][1] == 1
    assert [ids for _, ids in their_windows(lm.tokenizer, TEXT, 5, 7)] == ref.all_fed().tolist()
    repeated = " ".join(WORDS[:2] * 20)  # "w000 w001 " every 10 characters: every cut gives one of two windows
    ref = reference_layout(lm, repeated, encode_texts(lm.tokenizer, [repeated], arrays=True)[0],
                           ExtractionSettings(prefix=3, suffix=2, stride=5, windows="reference"))
    assert ref.n_windows == 2 and ref.spans()["char_start"].tolist() == [0, 5]
    none = reference_layout(lm, TEXT, encode_texts(lm.tokenizer, [TEXT], arrays=True)[0],
                            ExtractionSettings(prefix=3, suffix=2, stride=10, bos="none", windows="reference"))
    assert none.all_fed()[0].tolist() == [word_id(lm, j) for j in range(5)] and none.prefix_text_tokens == 3


def test_ties_at_the_top_by_hand():
    logits = torch.tensor([[3.0, 3.0, 1.0], [5.0, 1.0, 1.0], [2.0, 2.0, 2.0]], dtype=torch.float64)
    assert top_ties(logits, 1.0).tolist() == [2, 1, 3] and top_ties(logits, 0.7).tolist() == [2, 1, 3]
    top = np.array([True, True, False])
    log10_tied = np.array([-math.log10(2), 0.0, -math.inf])  # a 2-way tie once; unique tops; a token below the top
    greedy, pz = greedy_columns("reference", top, log10_tied)
    assert greedy.tolist() == [False, True, False] and pz.tolist() == log10_tied.tolist()
    greedy, pz = greedy_columns("ours", top, log10_tied)
    assert greedy.tolist() == [True, True, False] and pz.tolist() == [0.0, 0.0, -math.inf]


def test_a_tie_at_the_top_is_one_in_m_under_reference_and_greedy_under_ours(tmp_path):
    tok = with_bos(tiny_tokenizer(300).backend_tokenizer)
    model = tiny_llama(len(tok))
    with torch.no_grad():
        model.lm_head.weight.zero_()  # every logit 0: all m tokens tied at the top of every position
    lm = LanguageModel(model, tok, name="flat", stats_cache=StatsCache(tmp_path / "stats"))
    text = random_texts(1, seed=4, min_words=30, max_words=30)[0]
    m = model.config.vocab_size
    for windows, greedy, log10_greedy in (("ours", True, 0.0), ("reference", False, -3 * math.log10(m))):
        result = extract_texts(lm, [text], ExtractionSettings(prefix=4, suffix=3, stride=10, windows=windows))[0]
        w = result.windows
        assert result.n_windows > 3 and (w["greedy"] == greedy).all()
        assert w["log10_pz_greedy"].to_numpy() == pytest.approx(np.full(len(w), log10_greedy), abs=1e-12)
        assert w["log10_pz"].to_numpy() == pytest.approx(np.full(len(w), -3 * math.log10(m)), abs=1e-5)  # k = 40: all kept


@pytest.fixture(scope="module")
def trained(memorising, tmp_path_factory):
    """The session's memorising Llama (it recites its members) read through a BOS tokenizer: some windows within the
    top k, some greedy, some neither."""
    tok = with_bos(memorising["lm"].tokenizer.backend_tokenizer)
    lm = LanguageModel(memorising["lm"].model, tok, name="tiny-memorising-bos",
                       stats_cache=StatsCache(tmp_path_factory.mktemp("stats")))
    return lm, memorising["members"][:3] + memorising["nonmembers"][:1]


def their_log10_pz(logits: np.ndarray, fed: list[int], prefix: int, k: int, temperature: float) -> tuple[float, float]:
    """(log10 p_z under top-k, log10 greedy p_z) of one window from its float64 logits (width, vocab), as their
    `compute_logprob_batch`: logits / T, those below the k-th set to −inf, log-softmax, the suffix from index `prefix`;
    greedy is the same with k = 1."""
    sampled = greedy = 0.0
    for t in range(prefix, len(fed)):
        z = logits[t - 1] / temperature
        for kk, name in ((k, "sampled"), (1, "greedy")):
            kth = np.sort(z)[::-1][kk - 1]
            kept = np.where(z < kth, -np.inf, z)
            lse = kept.max() + math.log(np.exp(kept - kept.max()).sum())
            value = kept[fed[t]] - lse
            if name == "sampled":
                sampled += value
            else:
                greedy += value
    return sampled / math.log(10), greedy / math.log(10)


def test_reference_pz_matches_a_float64_recomputation(trained):
    lm, texts = trained
    s = ExtractionSettings(prefix=8, suffix=6, stride=10, top_k=5, temperature=1.2, windows="reference")
    lm.model.double()
    try:
        results = extract_texts(lm, texts, s, cache=False)
        want, got = [], pd.concat([r.windows for r in results])
        for text, result in zip(texts, results):
            windows = their_windows(lm.tokenizer, text, s.window, s.stride)
            assert result.n_windows == len(windows)
            assert result.windows["char_start"].tolist() == [cut for cut, _ in windows]  # byte-level: a token at every cut
            for _, fed in windows:
                assert fed[0] == BOS
                with torch.no_grad():
                    logits = lm.model(torch.tensor([fed])).logits[0].numpy()
                want.append(their_log10_pz(logits, fed, s.prefix, s.top_k, s.temperature))
    finally:
        lm.model.float()
    assert len(want) == len(got) > 20
    for (pz, greedy), a, b in zip(want, got["log10_pz"], got["log10_pz_greedy"]):
        assert (a == pz == -math.inf) or a == pytest.approx(pz, abs=1e-9)
        assert (b == greedy == -math.inf) or b == pytest.approx(greedy, abs=1e-9)
    assert np.isfinite(got["log10_pz"]).any() and not np.isfinite(got["log10_pz"]).all()
    assert np.isfinite(got["log10_pz_greedy"]).any()
    assert (got["prefix_tokens"] == 7).all()


def test_reference_results_are_cached_apart_from_ours(trained):
    trained = trained[0]
    ref = ExtractionSettings(prefix=8, suffix=6, stride=10, windows="reference")
    first = extract_texts(trained, [LONG], ref)[0]
    again = extract_texts(trained, [LONG], ref, progress=lambda d, t: pytest.fail("recomputed"))[0]
    assert again.windows.equals(first.windows)
    ours = extract_texts(trained, [LONG], ExtractionSettings(prefix=8, suffix=6, stride=10))[0]
    assert ours.n_windows != first.n_windows
    assert "windows" not in ExtractionSettings().key() and "windows=reference" in ref.key()
    assert ref.as_dict()["windows"] == "reference"


def test_reference_windows_are_refused_where_they_cannot_be_computed(trained, monkeypatch):
    trained = trained[0]
    ref = ExtractionSettings(prefix=8, suffix=6, stride=10, windows="reference")
    with pytest.raises(ValueError, match="cut from the text's characters"):
        layout_text(trained, LONG, ref)  # the book audit's token units
    with pytest.raises(ValueError, match="extraction windows"):
        ExtractionSettings(windows="theirs")
    monkeypatch.setattr(trained, "extraction_windows", lambda *a, **k: pytest.fail("asked the server"), raising=False)
    with pytest.raises(ValueError, match="does not report"):
        extract_texts(trained, [LONG], ref, cache=False)


def test_cli_writes_which_windows_it_used(tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    folder = save_tiny_model(tmp_path / "model")
    book = tmp_path / "texts.csv"
    pd.DataFrame({"id": ["long"], "text": [LONG]}).to_csv(book, index=False)
    out, summary = tmp_path / "w.csv", tmp_path / "s.csv"
    code, stdout, stderr = run_cli("extract", "--model", folder, "--input", book, "--output", out, "--summary", summary,
                                   "--prefix", 8, "--suffix", 6, "--stride", 10, "--top-k", 5, "--windows",
                                   "reference", "--device", "cpu")
    assert code == 0, stderr
    windows, rows = pd.read_csv(out), pd.read_csv(summary)
    assert set(windows["window_scheme"]) == {"reference"} and rows["window_scheme"].tolist() == ["reference"]
    assert "reference windows" in stdout and "10-character stride" in stdout
    code, _, stderr = run_cli("extract", "--model", folder, "--input", book, "--output", out, "--windows", "refrence")
    assert code == 2 and "extraction windows" in stderr and "reference" in stderr and stderr.count("\n") == 1
