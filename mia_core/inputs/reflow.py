"""Re-flowing text extracted from a PDF: its hard line breaks inside paragraphs joined back into running text.

A PDF stores lines, not paragraphs, so extracted text breaks every line ("the model was\\ntrained on") and
splits hyphenated words ("exam-\\nple"). Tokenisers see these breaks, and they change the scores, so an upload is
re-flowed before it is scored: lines of a paragraph are joined with one space, a hyphen at a line end followed by
a lower-case letter, after a lower-case one, is removed ("exam-" + "ple" → "example"; next to a capital it stays:
"self-" + "Aware" → "self-Aware", "PDF-" + "like" → "PDF-like"; a compound such as "well-known" broken at its
hyphen loses it, as in most re-flowing), blank lines stay paragraph breaks, and a line that starts a list item
(•, -, *, "1." …) stays on its own line.
"""
from __future__ import annotations

import re

#: A line that starts a list item keeps its line break: bullets, dashes, "1." / "1)" / "a)".
LIST_ITEM = re.compile(r"^\s*(?:[•\-*–·▪]\s|\d{1,3}[.)]\s|[a-zA-Z][.)]\s)")
#: A word broken at the line end by a hyphen: a letter, then "-" (or a soft hyphen) and nothing after it.
BROKEN_WORD = re.compile(r"[^\W\d_][-\u00ad]$")
#: A blank line (only whitespace): a paragraph break.
BLANK = re.compile(r"\n[ \t\f\v\u00a0]*\n")


def reflow(text: str) -> str:
    """The text with lines inside each paragraph joined; paragraphs separated by one blank line."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    paragraphs = [_join_lines(p) for p in re.split(r"(?:" + BLANK.pattern + r")+", text)]
    return "\n\n".join(p for p in paragraphs if p)


def _join_lines(paragraph: str) -> str:
    """One paragraph's lines joined: nothing after a broken word, a line break before a list item, else a space."""
    lines = [line.strip() for line in paragraph.split("\n")]
    lines = [line for line in lines if line]
    if not lines:
        return ""
    out = lines[0]
    for line in lines[1:]:
        if LIST_ITEM.match(line):
            out += "\n" + line
        elif BROKEN_WORD.search(out) and (out[-2].islower() and line[0].islower() or out[-1] == "\u00ad"):
            out = out[:-1] + line
        elif BROKEN_WORD.search(out):
            out += line
        else:
            out += " " + line
    return out
