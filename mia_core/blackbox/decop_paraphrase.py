"""DE-COP's paraphrases made by an LLM through a chat API (METHODS-API.md §19, "Paraphrases — where they come
from", option b; option c, the audited model itself, only with a warning): passages cut from a book, one request per
passage with the authors' prompt, three paraphrases parsed from each answer and put through the quality gates.

`paraphrase_book` is a pure function of the answers `send(step, body)` returns, so the evidence record replays it
(`mia verify`), and the paraphrases a quiz uses can be traced to the stored answers they came from.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable

from ..model.chat.answers import ChatAnswer
from .decop_passages import MAX_QUIZ_PASSAGES, QuizPassage, gate_problem

#: The paraphrase prompt as reported in the paper (quoted in Hallinan et al.'s DE-COP port), built line by line: some
#: copies break its first line with a backslash continuation, which glues "differentwords".
PROMPT_LINES = (
    "Rewrite this entire text (all sentences with no exception) expressing the same meaning using different words. "
    "Aim to keep the rewriting similar in length to the original text.",
    "Do it three times. The text to be rewritten is identified as <Example A>.",
    "Format your output as:",
    "Example B: <insert paraphrase B>",
    "",
    "Example C: <insert paraphrase C>",
    "",
    "Example D: <insert paraphrase D>",
    "",
    "-",
)
_EXAMPLE = re.compile(r"^\s*\**\s*Example ([BCD])\s*\**\s*:\s*\**[ \t]*", re.M)
_WORD = re.compile(r"\S+")

Send = Callable[[int, dict], "ChatAnswer | None"]


def paraphrase_prompt(passage: str) -> str:
    """The prompt for one passage."""
    return "\n".join(PROMPT_LINES) + "\nExample A: " + passage


@dataclass(frozen=True)
class ParaphraseSettings:
    """What decides a paraphrasing run's requests (stored in its manifest)."""

    passages: int = 30
    """Passages cut from each book (BookTection: ≈ 30), evenly spaced."""
    passage_words: int = 100
    """Words per passage (≈ 128 tokens, BookTection's medium length)."""
    temperature: float = 0.1
    """A 2025 replication's setting (Claude 3.5 Sonnet at T = 0.1); the authors' Claude 2.0 setting is not stated."""
    max_tokens: int = 2_000

    def __post_init__(self) -> None:
        if not 1 <= self.passages <= MAX_QUIZ_PASSAGES or self.passage_words < 10 or self.max_tokens < 1:
            raise ValueError(f"passages must be 1–{MAX_QUIZ_PASSAGES}, passage_words at least 10, max_tokens at "
                             "least 1")


def cut_passages(text: str, settings: ParaphraseSettings) -> list[str]:
    """`passages` stretches of `passage_words` words, evenly spaced from the text's start to its end, as the text
    spells them (fewer for a short text: no two overlap)."""
    spans = [m.span() for m in _WORD.finditer(text)]
    width = settings.passage_words
    room = len(spans) // width
    count = min(settings.passages, room)
    if count == 0:
        return []
    step = (len(spans) - width) / (count - 1) if count > 1 else 0
    starts = [round(i * step) for i in range(count)]
    return [text[spans[s][0]:spans[s + width - 1][1]] for s in starts]


def parse_paraphrases(answer: str | None) -> tuple[str, str, str] | None:
    """Paraphrases B, C and D of an answer in the prompt's format, each exactly once (None otherwise)."""
    if not answer:
        return None
    marks = list(_EXAMPLE.finditer(answer))
    if sorted(m.group(1) for m in marks) != ["B", "C", "D"]:
        return None
    found = {}
    for n, mark in enumerate(marks):
        end = marks[n + 1].start() if n + 1 < len(marks) else len(answer)
        found[mark.group(1)] = answer[mark.end():end].strip().rstrip("-").strip()
    if not all(found.values()):
        return None
    return found["B"], found["C"], found["D"]


def passages_text(title: str, author: str | None, text: str, settings: ParaphraseSettings) -> str:
    """A book as the text a paraphrasing run stores for it: its title, author and passages (JSON)."""
    return json.dumps({"title": title, "author": author, "passages": cut_passages(text, settings)},
                      ensure_ascii=False, sort_keys=True)


def paraphrase_book(text: str, model: str, api: str, settings: ParaphraseSettings, send: Send,
                    wait: Callable[[float], None] = lambda s: None) -> dict:
    """Each passage's request and its three paraphrases (None with a problem where the answer has not exactly three,
    or they fail the gates)."""
    book = json.loads(text)
    rows, problems = [], []
    for n, passage in enumerate(book["passages"]):
        body: dict = {"model": model}
        if api == "chat":
            body["messages"] = [{"role": "user", "content": paraphrase_prompt(passage)}]
        else:
            body["prompt"] = paraphrase_prompt(passage)
        body.update(max_tokens=settings.max_tokens, temperature=settings.temperature)
        answer = send(n, body)
        parsed = parse_paraphrases(answer.text if answer is not None else None)
        problem = ("no answer" if answer is None else "the answer does not hold exactly three paraphrases (Example B, "
                   "C and D)") if parsed is None else gate_problem(QuizPassage(passage, parsed))
        rows.append([passage, *parsed] if problem is None else None)
        if problem is not None:
            problems.append(f"passage {n + 1}: {problem}")
    return {"title": book["title"], "author": book["author"], "passages": rows, "problems": problems,
            "n_passages": len(rows), "n_paraphrased": sum(r is not None for r in rows)}
