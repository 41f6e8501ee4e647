"""Messages for unknown names (methods, datasets, options) that suggest the closest valid ones."""
from __future__ import annotations

import difflib
import html
import re
import tempfile
from typing import Iterable

#: Characters that reorder, hide or break text where it is shown, but tab and newline: C0 controls, DEL, C1
#: controls, the line and paragraph separators, and the bidi marks, embeddings, overrides and isolates (U+061C,
#: U+200E/U+200F, U+202A–U+202E, U+2066–U+2069). A regular-expression character class.
HIDDEN_CHARS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_HIDDEN = re.compile(f"[\t\n{HIDDEN_CHARS}]")


def unknown_name(kind: str, name: object, known: Iterable[str]) -> str:
    """"unknown method 'min_kk'; did you mean 'min_k', 'min_k_pp'? (available: …)" for a name not in `known`."""
    known = [str(k) for k in known]
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} {name!r}{hint} (available: {', '.join(known)})"


def check_choice(kind: str, value: object, known: Iterable[str]) -> None:
    """ValueError with a "did you mean" hint unless `value` is one of `known`."""
    known = tuple(known)
    if value not in known:
        raise ValueError(unknown_name(kind, value, known))


def shown_name(name: str) -> str:
    """`name` with every bidi control, control character and line break written as its escape (`\\u202e`): a book named
    `\\u202eevil.txt` would read backwards wherever it is shown or written (tables, reports, CSV cells, file names)."""
    return _HIDDEN.sub(escaped, name)


#: A dashboard session's upload folder (`ui.jobs.session_folder`: `mia-…` under the temporary folder) in a message.
_UPLOAD_FOLDER = re.compile(re.escape(tempfile.gettempdir().rstrip("/")) + r"/mia-[^/\s'\"]+/")


def shown_message(text: str) -> str:
    """A problem's message as stored and shown: a dashboard's upload folder cut from its paths (`books/a.csv`, not
    `/tmp/mia-audit-x1/books/a.csv`), hidden characters escaped (`shown_name`); a CLI user's own paths kept."""
    return shown_name(_UPLOAD_FOLDER.sub("", str(text)))


def escaped(match: re.Match) -> str:
    """`\\x1b`, `\\n`, `\\u202e`: a matched character as Python writes it in a string literal."""
    return match.group().encode("unicode_escape").decode("ascii")


def html_text(value) -> str:
    """`value` as text inside HTML (an element's body or a quoted attribute): every markup character escaped."""
    return html.escape(str(value), quote=True)


#: What a download's file name may hold: letters, digits, '.', '_' and '-' (no path, space or control character).
_FILE_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_name(*parts: object, suffix: str) -> str:
    """"audit_3f2a9c1e0b7d_demo-known_books.csv": the parts that say what a download holds, joined by '_', each cut to
    safe characters, so two runs' files neither overwrite each other nor get mixed up on any system."""
    return "_".join(_FILE_UNSAFE.sub("-", str(p)).strip("-.") or "x" for p in parts if str(p)) + suffix
