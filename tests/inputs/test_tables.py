"""Tests for mia_core.inputs.tables: every bad input gives one clear InputError naming the file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mia_core.inputs import tables as inputs
from mia_core.inputs.tables import InputError, read_labelled, read_texts

# name -> (file name, file bytes or None for missing, reader, text expected in the message)
BAD = {
    "missing": ("absent.txt", None, "texts", "no such file"),
    "empty": ("empty.txt", b"", "texts", "empty"),
    "whitespace": ("blank.csv", b"  \n\t\n", "texts", "empty"),
    "nul_bytes": ("nul.txt", b"abc\x00def", "texts", "looks binary"),
    "png": ("image.csv", b"\x89PNG\r\n\x1a\n" + b"x" * 20, "texts", "looks binary"),
    "latin1": ("latin.txt", "caf\u00e9 au lait".encode("latin-1"), "texts", "offset 3"),
    "bad_jsonl": ("rows.jsonl", b'{"text": "a"}\n{"text": "b"}\n{"text": "c"\n', "texts", "line 3"),
    "bad_json": ("rows.json", b'[{"text": "a"},', "texts", "not valid JSON"),
    "no_text_col": ("notext.csv", b"body,label\nhello,1\n", "texts", "'body', 'label'"),
    "header_only": ("header.csv", b"text,label\n", "texts", "no rows"),
    "empty_text": ("gaps.csv", b"text,n\nok,1\n,2\nfine,3\n   ,4\n", "texts", "row(s) 2, 4"),
    "no_label_col": ("nolabel.csv", b"text\nhello\nbye\n", "labelled", "--label-column"),
    "labels_012": ("three.csv", b"text,label\na,0\nb,1\nc,2\n", "labelled", "row 3: 2"),
    "labels_word": ("words.jsonl", b'{"text": "a", "label": "member"}\n{"text": "b", "label": 0}\n',
                    "labelled", "row 1: 'member'"),
    "labels_all_1": ("ones.csv", b"text,label\na,1\nb,1\n", "labelled", "only one class (label 1)"),
    "docx": ("report.docx", b"PK\x03\x04whatever", "texts", ".jsonl"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_one_clear_line(tmp_path: Path, case: str) -> None:
    name, data, reader, needle = BAD[case]
    path = tmp_path / name
    if data is not None:
        path.write_bytes(data)
    read = read_texts if reader == "texts" else read_labelled
    with pytest.raises(InputError) as info:
        read(path)
    message = str(info.value)
    assert name in message
    assert "\n" not in message and "\r" not in message
    assert needle in message


def test_no_text_column_mentions_flag(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"body": "x"}\n')
    with pytest.raises(InputError, match="--text-column"):
        read_texts(path)


def test_over_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.txt"
    path.write_text("x" * 100)
    monkeypatch.setattr(inputs, "MAX_INPUT_BYTES", 50)
    with pytest.raises(InputError, match="big.txt.*limit"):
        read_texts(path)


def test_many_empty_rows_listed_up_to_five(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["", None, "ok"] * 4))
    with pytest.raises(InputError, match=r"row\(s\) 1, 2, 4, 5, 7 \(\+3 more\)"):
        read_texts(path)


def test_txt_is_one_text(tmp_path: Path) -> None:
    path = tmp_path / "doc.txt"
    path.write_text("line one\nline two\n")
    df = read_texts(path)
    assert df["id"].tolist() == ["doc.txt"]
    assert df["text"].tolist() == ["line one\nline two\n"]


def test_md_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "note.md"
    path.write_bytes(b"\xef\xbb\xbf# Title\ncaf\xc3\xa9")
    assert read_texts(path)["text"].tolist() == ["# Title\ncaf\u00e9"]


def test_directory_of_texts_sorted(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("second")
    (tmp_path / "a.txt").write_text("first")
    (tmp_path / "c.txt").write_text("third")
    (tmp_path / "skip.csv").write_text("text\nnot me\n")
    df = read_texts(tmp_path)
    assert df["id"].tolist() == ["a.txt", "b.md", "c.txt"]
    assert df["text"].tolist() == ["first", "second", "third"]


def test_csv_keeps_na_text_ids_and_columns(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text('id,text,label,source\n001,NA,1,web\n002,"hello, world",0,NA\n')
    df = read_labelled(path)
    assert df["id"].tolist() == ["001", "002"]
    assert df["text"].tolist() == ["NA", "hello, world"]
    assert df["label"].tolist() == [1, 0]
    assert df["source"].tolist()[0] == "web"
    assert list(df.columns[:2]) == ["id", "text"]


def test_tsv_with_other_text_column(tmp_path: Path) -> None:
    path = tmp_path / "data.tsv"
    path.write_text("body\tis_member\nfirst text\ttrue\nsecond\tFalse\n")
    df = read_labelled(path, text_column="body", label_column="is_member")
    assert df["id"].tolist() == ["1", "2"]
    assert df["text"].tolist() == ["first text", "second"]
    assert df["label"].tolist() == [1, 0]


def test_jsonl_labels_of_every_accepted_kind(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    rows = [{"id": 7, "text": "a", "label": 1}, {"id": 8, "text": "b", "label": 0.0},
            {"id": 9, "text": "c", "label": True}, {"id": 10, "text": "d", "label": "0"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    df = read_labelled(path)
    assert df["id"].tolist() == ["7", "8", "9", "10"]
    assert df["text"].tolist() == ["a", "b", "c", "d"]
    assert df["label"].tolist() == [1, 0, 1, 0]
    assert str(df["label"].dtype) == "int64"


@pytest.mark.parametrize("payload", [
    [{"text": "x", "label": 1}, {"text": "y", "label": 0}],
    {"text": ["x", "y"], "label": [1, 0]},
    {"data": [{"text": "x", "label": 1}, {"text": "y", "label": 0}]},
])
def test_json_shapes(tmp_path: Path, payload: object) -> None:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(payload))
    df = read_labelled(path)
    assert df["id"].tolist() == ["1", "2"]
    assert df["text"].tolist() == ["x", "y"]
    assert df["label"].tolist() == [1, 0]


def test_json_keyed_records_and_plain_strings(tmp_path: Path) -> None:
    keyed = tmp_path / "keyed.json"
    keyed.write_text(json.dumps({"doc-a": {"content": "alpha"}, "doc-b": {"content": "beta"}}))
    df = read_texts(keyed, text_column="content")
    assert df["id"].tolist() == ["doc-a", "doc-b"]
    assert df["text"].tolist() == ["alpha", "beta"]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(["one", "two"]))
    df = read_texts(plain)
    assert df["id"].tolist() == ["1", "2"]
    assert df["text"].tolist() == ["one", "two"]
