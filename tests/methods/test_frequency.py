"""Frequency tables (DC-PDD) and corpus streaming: counts checked against independent computations."""
from __future__ import annotations

import copy
import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mia_core.inputs.corpus import iter_corpus_texts
from mia_core.methods.dc_pdd.frequency import FrequencyTable, build_frequency_table, load_frequency_table
from mia_core.model.identity import tokenizer_fingerprint

from tests.support.tiny import random_texts, tiny_tokenizer


def naive_counts(tok, texts, width):
    """Occurrence counts by a plain Counter over each text's own encoding (the independent reference)."""
    counter = Counter()
    for text in texts:
        counter.update(tok.encode(text, add_special_tokens=False))
    out = np.zeros(width, dtype=np.int64)
    for tid, n in counter.items():
        out[tid] = n
    return out


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer(300)


@pytest.fixture(scope="module")
def texts():
    return random_texts(120, seed=7)


def test_counts_match_naive_counter(tok, texts):
    table = build_frequency_table(tok, texts, batch_size=17)
    assert table.counts.dtype == np.int64 and len(table.counts) == len(tok)
    np.testing.assert_array_equal(table.counts, naive_counts(tok, texts, len(tok)))
    assert table.total == sum(len(tok.encode(t, add_special_tokens=False)) for t in texts)
    assert table.n_texts == len(texts)
    assert table.tokenizer_fingerprint == tokenizer_fingerprint(tok)


def test_counts_are_occurrences_not_documents(tok):
    word = " castle"
    ids = tok.encode(word, add_special_tokens=False)
    once = build_frequency_table(tok, ["Hello."]).counts
    five = build_frequency_table(tok, ["Hello." + word * 5]).counts
    expected = np.zeros_like(once)
    for tid in ids:
        expected[tid] += 5
    np.testing.assert_array_equal(five - once, expected)


def test_laplace_formula_by_hand():
    table = FrequencyTable(counts=np.array([3, 0, 1, 0], dtype=np.int64), tokenizer_fingerprint="x", corpus="c", n_texts=1)
    assert table.total == 4
    # (count + 1) / (N + |V|) = (count + 1) / 8
    np.testing.assert_allclose(table.frequencies(), [4 / 8, 1 / 8, 2 / 8, 1 / 8], rtol=0, atol=1e-15)
    assert table.frequencies().dtype == np.float64


def test_wider_logits_zero_padded(tok, texts):
    narrow = build_frequency_table(tok, texts)
    wide = build_frequency_table(tok, texts, vocab_size=len(tok) + 20)
    assert len(wide.counts) == len(tok) + 20
    np.testing.assert_array_equal(wide.counts[: len(tok)], narrow.counts)
    assert not wide.counts[len(tok):].any()
    f = wide.frequencies()
    np.testing.assert_allclose(f[-1], 1 / (wide.total + len(tok) + 20))
    np.testing.assert_allclose(f.sum(), 1.0)


def test_ids_beyond_vocab_size_rejected(tok, texts):
    with pytest.raises(ValueError, match="vocab_size"):
        build_frequency_table(tok, texts, vocab_size=50)


def test_save_load_round_trip(tok, texts, tmp_path):
    table = build_frequency_table(tok, texts, corpus_description="random words, seed 7")
    path = table.save(tmp_path / "sub" / "freq.npz")
    loaded = load_frequency_table(path, tokenizer=tok)
    np.testing.assert_array_equal(loaded.counts, table.counts)
    assert loaded.counts.dtype == np.int64
    assert (loaded.tokenizer_fingerprint, loaded.corpus, loaded.n_texts) == (
        table.tokenizer_fingerprint, "random words, seed 7", len(texts))
    with np.load(path, allow_pickle=False) as data:  # pickle-free on disk
        assert set(data.files) == {"counts", "meta"}


def test_mismatched_tokenizer_rejected(tok, texts, tmp_path):
    path = build_frequency_table(tok, texts).save(tmp_path / "freq.npz")
    other = tiny_tokenizer(280)
    with pytest.raises(ValueError, match="built with tokenizer .* model uses"):
        load_frequency_table(path, tokenizer=other)


def test_missing_and_corrupt_table(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        load_frequency_table(tmp_path / "nope.npz")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="bad.npz"):
        load_frequency_table(bad)


def _write_sources(root: Path, texts: list[str]) -> dict[str, object]:
    """The same texts written in every supported format."""
    half = len(texts) // 2
    (root / "a.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    jsonl = "".join(json.dumps({"text": t, "id": i}) + "\n" + ("\n" if i % 10 == 0 else "") for i, t in enumerate(texts))
    (root / "a.jsonl").write_text(jsonl, encoding="utf-8")
    with gzip.open(root / "a.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write(jsonl)
    with gzip.open(root / "a.txt.gz", "wt", encoding="utf-8") as fh:
        fh.write("\n".join(texts))
    (root / "a.json").write_text(json.dumps([{"text": t} for t in texts]), encoding="utf-8")
    (root / "strings.json").write_text(json.dumps(texts), encoding="utf-8")
    d = root / "dir"
    (d / "z").mkdir(parents=True)
    (d / "0_first.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:half]), encoding="utf-8")
    (d / "z" / "second.txt").write_text("\n".join(texts[half:]), encoding="utf-8")
    (d / "ignored.csv").write_text("text\nnot counted\n", encoding="utf-8")
    return {
        "txt": root / "a.txt",
        "txt.gz": str(root / "a.txt.gz"),
        "jsonl": root / "a.jsonl",
        "jsonl.gz": root / "a.jsonl.gz",
        "json records": root / "a.json",
        "json strings": root / "strings.json",
        "directory": d,
        "dicts": ({"text": t, "meta": 1} for t in texts),
        "list of paths": [root / "a.jsonl", root / "a.txt"],
    }


def test_all_sources_give_identical_counts(tok, texts, tmp_path):
    expected = naive_counts(tok, texts, len(tok))
    for name, source in _write_sources(tmp_path, texts).items():
        table = build_frequency_table(tok, source, batch_size=25)
        want = 2 * expected if name == "list of paths" else expected
        np.testing.assert_array_equal(table.counts, want, err_msg=name)
        assert table.n_texts == (2 if name == "list of paths" else 1) * len(texts), name


def test_txt_lines_are_texts(tmp_path, texts):
    (tmp_path / "c.txt").write_text("first line\r\n\n  \nsecond line\nthird", encoding="utf-8")
    assert list(iter_corpus_texts(tmp_path / "c.txt")) == ["first line", "second line", "third"]
    (tmp_path / "d.txt").write_text("\n".join(texts), encoding="utf-8")
    assert list(iter_corpus_texts(tmp_path / "d.txt", block_chars=50)) == texts  # block size is invisible


def test_bad_jsonl_line_names_file_and_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"text": "ok"}\n\n{"text": broken\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 3"):
        list(iter_corpus_texts(p))
    q = tmp_path / "nofield.jsonl"
    q.write_text('{"text": "ok"}\n{"body": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"nofield\.jsonl, line 2.*'text'"):
        list(iter_corpus_texts(q))
    with pytest.raises(ValueError, match=r"nofield\.jsonl, line 1.*'body'"):
        list(iter_corpus_texts(q, text_field="body"))


def test_missing_path_and_bad_utf8(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        list(iter_corpus_texts(tmp_path / "missing.txt"))
    with pytest.raises(FileNotFoundError, match="missing_dir"):
        build_frequency_table(tiny_tokenizer(300), str(tmp_path / "missing_dir"))
    p = tmp_path / "latin1.txt"
    p.write_bytes("caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.txt.*UTF-8"):
        list(iter_corpus_texts(p))


def test_generator_consumed_lazily(tok, texts):
    pulled = 0
    seen_at_progress: list[tuple[int, int, object]] = []

    def gen():
        nonlocal pulled
        for t in texts:
            pulled += 1
            yield {"text": t}

    def progress(done, total):
        seen_at_progress.append((done, pulled, total))

    table = build_frequency_table(tok, gen(), progress=progress, batch_size=10)
    assert seen_at_progress[0][1] <= 10  # only one batch pulled before the first report
    assert [d for d, _, _ in seen_at_progress] == list(range(10, len(texts) + 1, 10))
    assert all(p - d <= 10 for d, p, _ in seen_at_progress)
    assert all(total is None for _, _, total in seen_at_progress)
    np.testing.assert_array_equal(table.counts, naive_counts(tok, texts, len(tok)))


def test_a_table_of_counts_that_are_not_whole_numbers_is_refused():
    with pytest.raises(ValueError, match="whole numbers"):
        FrequencyTable(np.array([1.5, 2.0]), "x", "c", 1)
    table = FrequencyTable(np.array([3.0, 1.0]), "x", "c", 1)  # whole numbers in floats are counts
    assert table.counts.dtype == np.int64 and table.total == 4 and not table.counts.flags.writeable


def test_a_tokenizers_fingerprint_is_written_out_once_and_again_after_a_token_is_added(tok, monkeypatch):
    own = copy.deepcopy(tok)
    backend_type = type(own.backend_tokenizer)
    written = []
    real = backend_type.to_str

    class Counting:  # the backend's definition, counted each time it is written out
        def __get__(self, obj, kind=None):
            written.append(1)
            return real.__get__(obj, kind)

    first = tokenizer_fingerprint(own)
    monkeypatch.setattr(backend_type, "to_str", Counting(), raising=False)
    assert tokenizer_fingerprint(own) == first and not written  # remembered
    own.add_tokens(["<a-new-token>"])
    changed = tokenizer_fingerprint(own)
    assert changed != first and len(written) == 1  # a new size: written out and hashed again
    monkeypatch.undo()
    assert changed == tokenizer_fingerprint(copy.deepcopy(own))  # the same definition, a fresh object: same hash
    size = len(own)
    own.add_special_tokens({"additional_special_tokens": [own.convert_ids_to_tokens(7)]})  # made special in place
    assert len(own) == size and tokenizer_fingerprint(own) not in (changed, first)
    assert tokenizer_fingerprint(own) == tokenizer_fingerprint(copy.deepcopy(own))
