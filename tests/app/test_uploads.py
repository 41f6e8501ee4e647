"""Upload sets are written once per change: reruns neither rewrite nor re-read them; a session's uploads are bounded."""
from __future__ import annotations

import tempfile

import pytest
from streamlit.testing.v1 import AppTest

from mia_core.inputs.tables import InputError, read_texts
from mia_core.limits import MAX_SESSION_UPLOAD_BYTES, MAX_UPLOAD_SET_BYTES
from ui.helpers import read_upload


def uploads_page(folder: str) -> None:
    """A page saving the upload set that session state names ("files": [(id, name, bytes)], "big": a claimed size) as
    the books, and as "sets" - 1 more sets (as calibration members and non-members)."""
    from pathlib import Path

    import streamlit as st
    from streamlit.runtime.uploaded_file_manager import UploadedFile, UploadedFileRec

    from ui.uploads import saved_uploads

    files = [UploadedFile(UploadedFileRec(i, name, "text/plain", data), None)
             for i, name, data in st.session_state.get("files", [])]
    for f in files:
        f.size = st.session_state.get("big", f.size)  # as Streamlit reports it (a large set without its bytes)
    books = saved_uploads(files, Path(folder) / "books")
    others = [saved_uploads(files if i < st.session_state.get("sets", 1) else [], Path(folder) / f"cal{i}")
              for i in (1, 2)]  # an uploader past "sets" is empty
    st.text("|".join(map(str, [books, *others])))
    st.number_input("any widget", key="poke")


def test_a_rerun_with_the_same_files_rewrites_nothing_and_a_change_is_written(tmp_path):
    at = AppTest.from_function(uploads_page, args=(str(tmp_path),))
    at.session_state["files"] = [("id-a", "a.txt", b"one two"), ("id-b", "b.txt", b"three")]
    at.run()
    assert not at.exception and at.text[0].value == f"{tmp_path / 'books'}|None|None"
    (tmp_path / "books" / "a.txt").write_bytes(b"changed on disk")  # a rewrite would put the upload back
    at.number_input(key="poke").set_value(3).run()
    assert (tmp_path / "books" / "a.txt").read_bytes() == b"changed on disk"  # not written again
    at.session_state["files"] = [("id-c", "c.txt", b"four")]  # another upload: written, the removed one gone
    at.run()
    assert sorted(p.name for p in (tmp_path / "books").iterdir()) == ["c.txt"]
    at.session_state["files"] = []
    at.run()
    assert at.text[0].value == "None|None|None" and at.session_state["uploads_saved"] == {}


def test_a_session_keeps_at_most_the_session_bound(tmp_path):
    at = AppTest.from_function(uploads_page, args=(str(tmp_path),))
    at.session_state["files"] = [("id-a", "a.txt", b"one")]
    at.session_state["big"] = MAX_UPLOAD_SET_BYTES - 1_000  # each set just under the set bound
    at.session_state["sets"] = 2
    at.run()
    assert not at.error and at.text[0].value == f"{tmp_path / 'books'}|{tmp_path / 'cal1'}|None"
    at.session_state["sets"] = 3  # a third set: the three together pass the session's bound
    at.run()
    assert at.text[0].value == f"{tmp_path / 'books'}|{tmp_path / 'cal1'}|None"
    assert "this session already keeps 400 MB" in at.error[0].value
    assert f"{MAX_SESSION_UPLOAD_BYTES / 1e6:,.0f} MB one session may keep" in at.error[0].value
    assert not (tmp_path / "cal2").exists()
    at.session_state["sets"] = 1  # the calibration sets removed: room again
    at.run()
    assert list(at.session_state["uploads_saved"]) == [str(tmp_path / "books")]
    at.session_state["sets"] = 2
    at.run()
    assert not at.error and at.text[0].value == f"{tmp_path / 'books'}|{tmp_path / 'cal1'}|None"


class Upload:
    """What `read_upload` reads of an uploaded file: its name and bytes."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self.data = name, data

    def getvalue(self) -> bytes:
        return self.data


@pytest.mark.parametrize("name, data, needle", [("known.csv", b"a,b\n1,2\n", "known.csv has no text column"),
                                                ("known.jsonl", b"[" * 5000, "known.jsonl line 1"),
                                                ("known.csv", b"", "known.csv is empty")])
def test_a_helper_text_upload_error_names_the_file_not_the_server_folder(name, data, needle):
    """The error used to start with the server's temporary path (/tmp/tmpXXXX/known.csv)."""
    with pytest.raises(InputError) as caught:
        read_upload(Upload(name, data), read_texts)
    message = str(caught.value)
    assert message.startswith(needle) and "/tmp" not in message and tempfile.gettempdir() not in message
