"""Upload sets saved to the session's folder once: a rerun with the same files neither copies nor rewrites them.

Every widget change reruns the page. Writing the uploads again on each rerun gave their files new modification times,
so everything cached by them (the cost estimate's word counts) was computed again: a zip of 40 books of 50 MB cost
the server 2.6 GB and ~29 CPU-seconds per rerun. A set is now written when its files change (Streamlit gives each
uploaded file an id), and the bytes a session keeps saved are bounded (`limits.MAX_SESSION_UPLOAD_BYTES`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from mia_core.audit.sources import Source, write_uploads
from mia_core.limits import RequestTooLarge, check_session_uploads, check_upload_set

#: Session key: folder → (the files' ids, names and sizes; what to read; bytes) of each upload set saved.
SAVED = "uploads_saved"


def saved_uploads(files: Sequence[UploadedFile] | None, folder: Path, what: str = "This upload") -> Source | None:
    """`folder` holding exactly `files` (written only when they changed); what to read, or None — with the reason
    shown — for no files or a set over the bounds."""
    saved: dict[str, tuple] = st.session_state.setdefault(SAVED, {})
    key = str(folder)
    if not files:
        saved.pop(key, None)  # a cleared uploader keeps nothing
        return None
    signature = tuple((f.file_id, f.name, f.size) for f in files)
    if key in saved and saved[key][0] == signature:
        return saved[key][1]
    size = sum(f.size for f in files)
    try:
        check_upload_set([f.size for f in files], what)
        check_session_uploads(sum(entry[2] for k, entry in saved.items() if k != key), size)
    except RequestTooLarge as err:
        saved.pop(key, None)
        st.error(str(err))
        return None
    source = write_uploads({f.name: f.getvalue() for f in files}, folder)
    saved[key] = (signature, source, size)
    return source
