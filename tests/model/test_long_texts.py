"""Long texts (issue 31): tokenised in pieces, a long text gives exactly the ids and offsets of tokenising it whole,
the same statistics as before, and costs memory per piece, not per text."""
from __future__ import annotations

import gc
import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from mia_core.model import encoding, pieces

from tests.support.oracle import naive_stats
from tests.support.tiny import WORDS, random_texts, tiny_llama, tiny_tokenizer

ROOT = Path(__file__).resolve().parents[2]
#: Pieces that make cuts hard: runs of spaces and newlines, combining marks, emoji, CJK, a long unbroken run, a
#: special token written in the text.
HARD = ("   ", " " * 40, "\n\n", "\n", "\r\n", "\t", "naïve café — 東京 ", "e\u0301\u0301", "😀😀 ", "東京大阪" * 20,
        "x" * 300, "<|endoftext|>", "12345678901234567890")


def hard_text(seed: int, n: int = 120) -> str:
    """Words with the hard pieces mixed in."""
    rng = random.Random(seed)
    return "".join(rng.choice(HARD) if rng.random() < 0.3 else rng.choice(WORDS) + " " for _ in range(n))


NO_WHITESPACE = ["abc" * 1500, "x" * 4000, "東京" * 1500, "".join(random.Random(1).choice("abcdefgh") for _ in range(5000)),
                 "😀" * 1200, " " * 3000, "\n" * 2500 + "end", "a b " * 1000]


def _bert_like() -> Tokenizer:
    """A WordPiece tokenizer with a lowercasing, accent-stripping normalizer and [CLS] … [SEP] around every text."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(random_texts(300, seed=3) + [" ".join(WORDS)],
                            trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def _metaspace_unigram() -> Tokenizer:
    """A SentencePiece-like Unigram tokenizer: "▁" marks spaces and is prepended to the text's first word only."""
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.train_from_iterator(random_texts(300, seed=5) + [" ".join(WORDS)],
                            trainers.UnigramTrainer(vocab_size=150, special_tokens=["<s>", "</s>", "<unk>"],
                                                    unk_token="<unk>"))
    return tok


def _bos_eos_bpe() -> Tokenizer:
    """The tiny byte-level BPE with a template putting a BOS first and an EOS last."""
    tok = Tokenizer.from_str(tiny_tokenizer(300).backend_tokenizer.to_str())
    eot = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A <|endoftext|>",
                                                       special_tokens=[("<|endoftext|>", eot)])
    return tok


BACKENDS = {"byte-level bpe": lambda: tiny_tokenizer(300).backend_tokenizer, "bpe with bos and eos": _bos_eos_bpe,
            "wordpiece (bert)": _bert_like, "unigram (metaspace)": _metaspace_unigram}


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def backend(request):
    return BACKENDS[request.param]()


def assert_same_as_whole(backend, text, **sizes):
    whole = backend.encode(text, add_special_tokens=True)
    got = pieces.encode_long(backend, text, **sizes)
    assert got.ids.tolist() == whole.ids
    assert got.offsets.tolist() == [list(span) for span in whole.offsets]
    assert got.special.tolist() == whole.special_tokens_mask
    assert got.ids.dtype == np.int64 and got.offsets.dtype == np.int64 and got.offsets.shape == (len(whole.ids), 2)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("piece_chars,overlap_chars", [(150, 40), (333, 64), (1000, 200)])
def test_pieces_give_the_whole_texts_tokens(backend, seed, piece_chars, overlap_chars):
    assert_same_as_whole(backend, hard_text(seed), piece_chars=piece_chars, overlap_chars=overlap_chars)


@pytest.mark.parametrize("index", range(len(NO_WHITESPACE)))
def test_pieces_give_the_whole_texts_tokens_without_whitespace(backend, index):
    for piece_chars, overlap_chars in ((200, 32), (777, 100)):
        assert_same_as_whole(backend, NO_WHITESPACE[index], piece_chars=piece_chars, overlap_chars=overlap_chars)


def test_every_cut_place_of_one_text(backend):
    """The first cut at every character of a stretch with a run of spaces, a newline run, emoji and a long word."""
    text = "start " + hard_text(99, 30) + "   \n\n😀😀 " + "y" * 120 + " end " + hard_text(98, 60)
    for piece_chars in range(120, 260, 7):
        assert_same_as_whole(backend, text, piece_chars=piece_chars, overlap_chars=48)


def test_short_and_edge_texts(backend):
    for text in ("", "a", " ", "hello world", "x" * 10):
        assert_same_as_whole(backend, text, piece_chars=4, overlap_chars=2)


@pytest.fixture
def small_pieces(monkeypatch):
    """Texts over 500 characters tokenised in pieces of 300 (overlap 60): many cuts in a short test."""
    monkeypatch.setattr(encoding, "LONG_TEXT_CHARS", 500)
    monkeypatch.setattr(pieces, "PIECE_CHARS", 300)
    monkeypatch.setattr(pieces, "OVERLAP_CHARS", 60)


def test_encode_texts_mixes_long_and_short_texts(tok, small_pieces):
    texts = [hard_text(1, 400), "short text", hard_text(2, 300) + "<|endoftext|>", "", random_texts(1, seed=4)[0]]
    whole = tok(texts, add_special_tokens=True, return_offsets_mapping=True)
    lists = encoding.encode_texts(tok, texts)
    arrays = encoding.encode_texts(tok, texts, arrays=True)
    assert any(len(t) > 500 for t in texts)
    for i in range(len(texts)):
        ids, spans = whole["input_ids"][i], whole["offset_mapping"][i]
        assert lists[i] == (ids, spans)  # the lists the methods' passes read, as before
        assert list(arrays[i][0]) == ids and arrays[i][1].tolist() == [list(s) for s in spans]
        assert arrays[i][1].dtype == np.int64 and arrays[i][1].shape == (len(ids), 2)
    assert isinstance(arrays[0][0], np.ndarray) and isinstance(arrays[1][0], list)  # short texts keep the fast lists


def test_encode_texts_batches_many_texts(tok, monkeypatch):
    monkeypatch.setattr(encoding, "BATCH_TEXTS", 3)
    texts = random_texts(10, seed=8)
    whole = tok(texts, add_special_tokens=True, return_offsets_mapping=True)
    assert encoding.encode_texts(tok, texts) == list(zip(whole["input_ids"], whole["offset_mapping"]))


CONTEXT = 32


@pytest.fixture
def lm(tok, make_lm):
    return make_lm(tiny_llama(len(tok), seed=6, max_positions=CONTEXT), tok, max_length=CONTEXT)


@pytest.mark.parametrize("bos", ["auto", "none"])
def test_long_text_statistics_equal_whole_text_tokenisation(lm, monkeypatch, bos):
    """A long text's statistics with pieces and in-place windows equal those of the whole-text path, bit for bit,
    and its ids and offsets are the tokenizer's own for the whole text."""
    texts = [hard_text(3, 200), "a short one", hard_text(4, 90)]
    monkeypatch.setattr(encoding, "LONG_TEXT_CHARS", 1 << 30)  # the whole-text path, as before issue 31
    before = lm.token_stats(texts, bos=bos, cache=False, batch_tokens=3 * CONTEXT)
    monkeypatch.setattr(encoding, "LONG_TEXT_CHARS", 300)
    monkeypatch.setattr(pieces, "PIECE_CHARS", 250)
    monkeypatch.setattr(pieces, "OVERLAP_CHARS", 50)
    after = lm.token_stats(texts, bos=bos, cache=False, batch_tokens=3 * CONTEXT)
    for text, old, new in zip(texts, before, after):
        assert new.long_text == old.long_text and new.n_text_tokens == old.n_text_tokens
        assert new.first_token_scored is old.first_token_scored
        for name in ("token_ids", "offsets", "logprob", "mu", "sigma", "top1_id", "top1_logprob", "entropy", "rank"):
            a, b = getattr(new, name), getattr(old, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        assert list(new.tokens) == list(old.tokens)
        whole = lm.tokenizer(text, return_offsets_mapping=True)
        first = 0 if bos == "auto" else 1
        assert new.token_ids.tolist() == whole["input_ids"][first:]
        assert new.offsets.tolist() == [list(s) for s in whole["offset_mapping"][first:]]
    long = after[0]
    assert long.long_text == "sliding" and long.n_scored > 8 * CONTEXT
    fed = lm.fed_ids(texts[0], bos)  # an independent computation: float64, one token at a time, same contexts
    windows = lm.window_plan(len(fed), CONTEXT, CONTEXT // 2)
    start_of = {t: a for a, b, s in windows for t in range(a + s, b)}
    expected = naive_stats(lm.model, fed[:200], context_start=lambda t: start_of[t])
    np.testing.assert_allclose(long.logprob[:199], expected["logprob"], rtol=1e-5, atol=2e-5)
    np.testing.assert_array_equal(long.rank[:199], expected["rank"])


def test_truncated_long_text_keeps_no_view_of_the_whole(lm, small_pieces):
    text = hard_text(5, 400)
    stats = lm.token_stats([text], long_text="truncate", cache=False)[0]
    assert stats.long_text == "truncated" and stats.n_scored == CONTEXT - 1
    assert stats.token_ids.base is None and stats.offsets.base is None  # not the whole text's arrays kept alive


MEMORY_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    sys.path.insert(0, sys.argv[1])
    from tests.support.tiny import tiny_llama, tiny_tokenizer
    from mia_core.model.language_model import LanguageModel
    from mia_core.model.stats_cache import StatsCache
    tok = tiny_tokenizer(300)
    lm = LanguageModel(tiny_llama(len(tok), max_positions=64), tok, name="tiny", max_length=64,
                       stats_cache=StatsCache(sys.argv[2]))
    text = ("the river castle naïve 東京   \\n" * 200_000)[:4_000_000]
    lm.token_stats(["warm up"], cache=False)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    stats = lm.token_stats([text], long_text="truncate", cache=False)[0]
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"grew_mb": (after - before) / 1024, "n_text_tokens": stats.n_text_tokens}))
""")


def test_tokenising_a_long_text_costs_memory_per_piece(tmp_path):
    """4 M characters (~2.3 M tokens) tokenised for the statistics pass: whole, the peak grew by ~1.3 GB (the
    tokenizer's encoding at ~300 bytes a token, then lists of ids and offset tuples); in pieces, by its arrays."""
    found = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(ROOT), str(tmp_path)], capture_output=True,
                           text=True, check=True, timeout=300)
    result = json.loads(found.stdout.strip().splitlines()[-1])
    assert result["n_text_tokens"] > 1_500_000
    assert result["grew_mb"] < 400, result  # arrays: ~25 bytes a token (60 MB) plus one piece's encoding


@pytest.mark.parametrize("was_on", [True, False])
def test_tokenising_pauses_the_collector_and_leaves_it_as_it_was(was_on, monkeypatch):
    seen = []
    real = encoding._encode_texts
    monkeypatch.setattr(encoding, "_encode_texts", lambda *a: seen.append(gc.isenabled()) or real(*a))
    (gc.enable if was_on else gc.disable)()
    try:
        out = encoding.encode_texts(tiny_tokenizer(), ["a few words", "more words here"])
        assert seen == [False] and gc.isenabled() == was_on and len(out) == 2
        monkeypatch.setattr(encoding, "_encode_texts", lambda *a: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            encoding.encode_texts(tiny_tokenizer(), ["x"])
        assert gc.isenabled() == was_on
    finally:
        gc.enable()
