"""Texts read a part at a time (`text_parts`, issue 45, item 11) are the texts `read_texts` reads whole, ids and all,
and a bad input gets the same one-line refusal, before anything is scored."""
from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from mia_core.inputs import table_parts
from mia_core.inputs.tables import InputError, read_texts
from mia_core.inputs.text_parts import frame_parts, text_parts

from tests.inputs.test_tables import BAD

ODD_TEXTS = ["plain", "NA", "", "  ", "a,b", 'say "hi"', "line\nbreak", "cr\r\nlf", "tab\tin", "naïve", "\u2028x"]
JSON_VALUES = ["s", "NA", "", None, 3, 2.5, True, 10**20, [1], {"a": 1}]


def odd_table(path, seed: int) -> None:
    """A small CSV/TSV/JSONL table of odd cells: quoting, line breaks, "NA", numbers, gaps, missing keys."""
    rng = random.Random(seed)
    rows = [{"id": rng.choice(["a", "", "NA", "007"]), "text": rng.choice(ODD_TEXTS[:2] + ODD_TEXTS[4:]), "n": i}
            for i in range(rng.randint(1, 12))]
    if path.suffix == ".jsonl":
        lines = []
        for row in rows:
            if rng.random() < 0.5:
                row["id"] = rng.choice(JSON_VALUES)
            if rng.random() < 0.2:
                del row["id"]
            if rng.random() < 0.3:
                row["text"] = rng.choice([3, 2.5, True, "x"])
            lines.append(json.dumps(row, ensure_ascii=rng.random() < 0.5) if rng.random() < 0.9 else json.dumps("bare"))
        path.write_text("\n".join(lines) + rng.choice(["", "\n", "\n\n"]))
    else:
        pd.DataFrame(rows).to_csv(path, index=False, sep="\t" if path.suffix == ".tsv" else ",",
                                  lineterminator=rng.choice(["\n", "\r\n"]))


def outcome(read):
    """The frame of id and text, or the refusal."""
    try:
        frame = read()
    except InputError as err:
        return str(err)
    return frame[["id", "text"]].astype(object).values.tolist()


@pytest.mark.parametrize("case", sorted(c for c in BAD if BAD[c][2] == "texts"))
def test_a_bad_input_is_refused_as_read_texts_refuses_it(tmp_path, case):
    name, data, _, _ = BAD[case]
    path = tmp_path / name
    if data is not None:
        path.write_bytes(data)
    assert outcome(lambda: text_parts(path).whole()) == outcome(lambda: read_texts(path))


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_parts_hold_the_texts_and_ids_read_texts_gives(tmp_path, monkeypatch, suffix):
    monkeypatch.setattr(table_parts, "FIRST_CSV_ROWS", 1)
    for seed in range(30):
        path = tmp_path / f"t{seed}{suffix}"
        odd_table(path, seed)
        expected = outcome(lambda: read_texts(path))
        assert outcome(lambda: text_parts(path).whole()) == expected, path.read_text()
        if isinstance(expected, list):  # parts of two rows, or of about one character, join into the same texts
            parts = text_parts(path)
            for rows, chars in ((2, None), (None, 1)):
                joined = pd.concat(list(parts.parts(rows, chars)), ignore_index=True)
                assert outcome(lambda: joined) == expected
            assert list(parts.texts()) == [text for _, text in expected] and parts.n == len(expected)


def test_json_numbers_print_as_their_column_types_them(tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_text('{"id": 1, "text": "a"}\n{"text": "b"}\n{"id": 2, "text": 3}\n{"id": 4, "text": 2.5}\n')
    assert outcome(lambda: text_parts(path).whole()) == [["1.0", "a"], ["2", "b"], ["2.0", "3"], ["4.0", "2.5"]]
    assert outcome(lambda: text_parts(path).whole()) == outcome(lambda: read_texts(path))


def test_a_large_table_is_given_in_parts_of_the_size_asked(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"text": f"text {i}"}) + "\n" for i in range(1000)))
    parts = text_parts(path)
    sizes = [len(p) for p in parts.parts(300, None)]
    assert sizes == [300, 300, 300, 100] and parts.count(300, 10**9) == 4
    last = list(parts.parts(300, None))[-1]
    assert last["id"].tolist()[:2] == ["901", "902"]  # row numbers count across parts


def test_a_frame_is_cut_by_rows_and_characters():
    frame = pd.DataFrame({"id": list("abcde"), "text": ["x" * 10, "y" * 10, "z" * 30, "w", "v"], "label": 1})
    parts = frame_parts(frame)
    assert [p["id"].tolist() for p in parts.parts(2, None)] == [["a", "b"], ["c", "d"], ["e"]]
    assert [p["id"].tolist() for p in parts.parts(None, 20)] == [["a", "b"], ["c"], ["d", "e"]]
    assert parts.whole().columns.tolist() == ["id", "text"] and (parts.n, parts.chars) == (5, 52)


@pytest.mark.parametrize("data", [b"text\ncaf\xc3\xa9 \xff\n", b"\xef\xbb\xbftext\nab\xe2\x82\n", b"text\n\xc3",
                                  b"\xef\xbb\xbf \n\t\n"])
def test_a_file_checked_a_block_at_a_time_is_refused_as_read_whole(tmp_path, monkeypatch, data):
    monkeypatch.setattr(table_parts, "BLOCK_BYTES", 3)  # characters cut across blocks
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    assert outcome(lambda: text_parts(path).whole()) == outcome(lambda: read_texts(path))
