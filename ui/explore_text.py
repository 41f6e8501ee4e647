"""Explore's text: one editable text area, filled by pasting or by an upload.

An upload puts its extracted text into the text area (PDF text re-flowed: line breaks inside paragraphs joined,
`mia_core.inputs.reflow`), where it can be edited before scoring; what was pasted before is kept aside and comes
back when the upload is removed.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from mia_core.inputs.documents import MAX_UPLOAD_BYTES, DocumentError, document_text
from mia_core.inputs.reflow import reflow
from mia_core.limits import MAX_REQUEST_CHARS
from ui.markdown import md

SAMPLE = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
          "foolishness, it was the epoch of belief, it was the epoch of incredulity.")
#: Session keys: the text area, the pasted text kept aside during an upload, the upload last seen, the file whose
#: text is in the text area.
TEXT, PASTED, SEEN, SHOWN = "explore_text", "explore_pasted", "explore_upload_seen", "explore_upload_shown"
#: The problem with the current upload (shown while it stays chosen).
PROBLEM = "explore_upload_problem"
#: The text as last drawn, kept under a key no widget owns: Streamlit drops a widget's state when a page without that
#: widget runs, so a text pasted here would be lost after a visit to another page.
KEPT = "explore_text_kept"


def upload_widget():
    """The document uploader (a function of its own, so a test can stand in for the browser's file)."""
    return st.file_uploader("Upload a document", type=["txt", "md", "pdf", "epub"], key="explore_upload",
                            help=f"Up to {MAX_UPLOAD_BYTES // 1_000_000} MB; its text appears in the text box below "
                                 f"(editable; {MAX_REQUEST_CHARS:,} characters are scored at once).")


def upload_text(name: str, data: bytes) -> str:
    """A document's text as it goes into the text area: PDF text re-flowed, other text as written."""
    text = document_text(name, data)
    return reflow(text) if Path(name).suffix.lower() == ".pdf" else text


def follow_upload(upload) -> None:
    """Put a new upload's text into the text area (keeping what was pasted aside); restore the pasted text when the
    upload is removed. Runs before the text area is drawn, so its state may be set."""
    state = st.session_state
    seen = None if upload is None else f"{upload.name}\x00{upload.file_id}"
    if seen == state.get(SEEN):
        if upload is not None and state.get(PROBLEM):
            st.error(state[PROBLEM])
        return
    state.pop(PROBLEM, None)
    if upload is None:
        if PASTED in state:
            state[TEXT] = state.pop(PASTED)
        state.pop(SHOWN, None)
    else:
        try:
            text = upload_text(upload.name, upload.getvalue())
        except DocumentError as err:
            state[PROBLEM] = str(err)
            st.error(state[PROBLEM])
            text = None
        if text is not None:
            if PASTED not in state:
                state[PASTED] = state.get(TEXT, SAMPLE)
            if len(text) > MAX_REQUEST_CHARS:
                st.warning(f"{md(upload.name)} holds {len(text):,} characters: its first {MAX_REQUEST_CHARS:,} are in "
                           "the text box (the most scored at once).")
            state[TEXT] = text[:MAX_REQUEST_CHARS]
            state[SHOWN] = upload.name
    state[SEEN] = seen


def text_input_ui() -> str:
    """The text to explore: pasted, or an upload's text (editable); removing the upload brings the pasted text back."""
    upload = upload_widget()
    if TEXT not in st.session_state:  # a first visit, or back from another page (which dropped the widget's state)
        st.session_state[TEXT] = st.session_state.get(KEPT, SAMPLE)
    follow_upload(upload)
    shown = st.session_state.get(SHOWN)
    if upload is not None and shown is not None:
        pdf = Path(shown).suffix.lower() == ".pdf"
        st.caption(f"The text below is {md(shown)}'s" + (", re-flowed (line breaks inside paragraphs joined)"
                                                            if pdf else "")
                   + ": edit it before scoring; remove the file to get back what was pasted.")
    text = st.text_area("Text", height=150, key=TEXT, max_chars=MAX_REQUEST_CHARS)
    st.session_state[KEPT] = text
    return text
