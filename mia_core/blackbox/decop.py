"""DE-COP (METHODS-API.md §19; Duarte et al., ICML 2024): a quiz per passage — which of four passages, the verbatim and
three paraphrases, is the book's? — asked in all 24 orders, the answer read as the four letters' probabilities (tier
GL) or as the letter answered (tier G).

`decop_book` is a pure function of the answers `send(step, body)` returns, so the evidence record replays it
(`mia verify`). It gives each question's letter probabilities; the calibration and the comparison with clean books
are over the whole run (`decop_stats`).
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

from ..model.chat.answers import ChatAnswer, Choice
from .decop_passages import QuizBook
from .gl_bound import token_text
from .responses import classify

LETTERS = "ABCD"
#: Every order of (verbatim, paraphrase 1, 2, 3) over the options A–D: `ORDERS[o][slot]` is the passage shown at
#: `slot` (0 = the verbatim). Each letter holds the verbatim in 6 of the 24 [code `oversample_labels_fn.py`].
ORDERS: tuple[tuple[int, ...], ...] = tuple(itertools.permutations(range(4)))
#: The system text the authors' code gives chat models (Claude 2, Llama-2) [code `2_decop_blackbox.py`].
EXAM_SYSTEM = ("You are entering a multiple choice questions exam. You should directly answer each question by "
               "choosing the correct option. Be concise and straight to the point in your answer. Output only the "
               "letter corresponding to the correct answer.")
#: The authors' seed for `gpt-3.5-turbo-instruct` [code].
SEED = 2319
#: A letter A–D standing alone ("Answer: B" is B, not the A of "Answer").
_FIRST_LETTER = re.compile(r"(?<![A-Za-z])[ABCD](?![A-Za-z])")

Send = Callable[[int, dict], "ChatAnswer | None"]


@dataclass(frozen=True)
class DecopSettings:
    """Everything that decides a DE-COP run's requests (stored in its manifest)."""

    logprobs: bool = True
    """Tier GL: ask the first answer token's `top_logprobs` and read the four letters' probabilities; False (tier G):
    read the letter answered."""
    top_logprobs: int = 20
    max_tokens: int = 1
    """The authors' completion setting (1); a chat model that opens with a word gives an invalid answer at tier G."""
    temperature: float = 0.0
    seed: int = SEED
    tokenizer: str | None = None
    """The model's tokenizer.json, declared by the user, to read tokens an API spells as ids ("token_id:N", vLLM's
    `--return-tokens-as-token-ids`); the letters are then found by decoding, never by hard-coded ids."""
    tokenizer_sha256: str | None = None

    def __post_init__(self) -> None:
        if (self.tokenizer is None) != (self.tokenizer_sha256 is None):
            raise ValueError("a tokenizer needs its SHA-256")
        if not 1 <= self.top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be 1–20 (got {self.top_logprobs})")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1 (got {self.max_tokens})")


def true_letter(order: Sequence[int]) -> int:
    """The slot (0–3, A–D) that shows the verbatim passage in an order."""
    return list(order).index(0)


def question(title: str, author: str | None, options: Sequence[str]) -> str:
    """The quiz question, verbatim from the authors' completion prompt [code `2_decop_blackbox.py`]; without an author
    (a BookTection row names none) "by {author}" is left out (ours)."""
    source = f'"{title}" book by {author}' if author else f'"{title}" book'
    lines = [f"Question: Which of the following passages is verbatim from the {source}?", "Options:"]
    lines += [f"{letter}. {text}" for letter, text in zip(LETTERS, options)]
    return "\n".join(lines) + "\nAnswer: "


def quiz_body(model: str, api: str, book: QuizBook, passage: int, order: int, settings: DecopSettings) -> dict:
    """One question's request: completions get the question alone (the authors' instruct-model path, no system text);
    chat gets the authors' exam instruction as the system message and the question as the user's (ours: the order
    of their Claude/Llama-2 prompt, in chat roles)."""
    texts = book.passages[passage].options
    text = question(book.title, book.author, [texts[i] for i in ORDERS[order]])
    body: dict = {"model": model}
    if api == "chat":
        body["messages"] = [{"role": "system", "content": EXAM_SYSTEM}, {"role": "user", "content": text}]
    else:
        body["prompt"] = text
    body.update(max_tokens=settings.max_tokens, temperature=settings.temperature, seed=settings.seed)
    if settings.logprobs:
        if api == "chat":
            body.update(logprobs=True, top_logprobs=settings.top_logprobs)
        else:
            body["logprobs"] = settings.top_logprobs
    return body


@dataclass(frozen=True)
class LetterRead:
    """The four letters' probabilities from one answer (None: no log-probs), and which letters were not listed."""

    p: tuple[float, ...] | None
    missing: tuple[str, ...]


def letter_probabilities(choice: Choice, spell: Callable[[str], str] = lambda token: token) -> LetterRead:
    """`softmax` of the four letters' log-probs at the first generated token. A letter's log-prob is the log of the
    summed probabilities of the listed tokens that spell it (" A" and "A" alike; ours); a letter not listed gets the
    smallest listed log-prob and is flagged (ours, §19: the authors' code raises `KeyError`). `spell` gives a listed
    token's text (tokens spelt as ids are decoded with the declared tokenizer)."""
    if not choice.logprobs:
        return LetterRead(None, ())
    first = choice.logprobs[0]
    listed = {**first.top, first.token: first.logprob}
    floor = min(listed.values())
    logs, missing = [], []
    texts = {token: spell(token).strip() for token in listed}
    for letter in LETTERS:
        spelled = [v for token, v in listed.items() if texts[token] == letter]
        if spelled:
            top = max(spelled)
            logs.append(top + math.log(math.fsum(math.exp(v - top) for v in spelled)))
        else:
            logs.append(floor)
            missing.append(letter)
    top = max(logs)
    weights = [math.exp(v - top) for v in logs]
    total = math.fsum(weights)
    return LetterRead(tuple(w / total for w in weights), tuple(missing))


def letter_answered(text: str | None) -> int | None:
    """Tier G: the first of A–D standing alone in the answer (None: an invalid answer, recorded) [§19; "alone" is
    ours, so that the A of "Answer: B" is not read]."""
    found = _FIRST_LETTER.search(text or "")
    return LETTERS.index(found.group()) if found else None


def decop_book(text: str, model: str, api: str, settings: DecopSettings, send: Send,
               wait: Callable[[float], None] = lambda s: None) -> dict:
    """Every question of one book (its passages × 24 orders) through `send`, and what each answer says.

    `questions` rows are `[passage, order, true slot, p (4 floats) or None, letter answered or None, letters
    missing]`; `accuracy_raw` is the share whose argmax (tier GL) or answer (tier G) is the verbatim, before the
    run's calibration."""
    book = QuizBook.from_json(text)
    spell = (partial(token_text, settings.tokenizer, settings.tokenizer_sha256) if settings.tokenizer is not None
             else (lambda token: token))
    rows, refusals, answers, input_tokens, output_tokens = [], 0, 0, 0, 0
    for passage in range(len(book.passages)):
        for order in range(len(ORDERS)):
            answer = send(passage * len(ORDERS) + order, quiz_body(model, api, book, passage, order, settings))
            choice = answer.choices[0] if answer is not None and answer.choices else None
            if answer is not None:
                answers += 1
                input_tokens += answer.input_tokens or 0
                output_tokens += answer.output_tokens or 0
            read = (letter_probabilities(choice, spell) if choice is not None and settings.logprobs
                    else LetterRead(None, ()))
            said = letter_answered(choice.text) if choice is not None else None
            refusals += choice is not None and classify(choice.text, choice.finish_reason).kind == "refusal"
            rows.append([passage, order, true_letter(ORDERS[order]), list(read.p) if read.p else None, said,
                         "".join(read.missing)])
    return {"title": book.title, "author": book.author, "n_passages": len(book.passages), "n_questions": len(rows),
            "questions": rows, "answers": answers, "refusals": refusals,
            "invalid": sum(r[3] is None and r[4] is None for r in rows),
            "missing_letters": sum(len(r[5]) for r in rows), "input_tokens": input_tokens,
            "output_tokens": output_tokens, "accuracy_raw": raw_accuracy(rows)}


def predicted(row: Sequence) -> int | None:
    """A question's predicted slot: the argmax of its probabilities (GL), else the letter answered (G)."""
    if row[3] is not None:
        return max(range(4), key=lambda slot: row[3][slot])
    return row[4]


def raw_accuracy(rows: Sequence[Sequence]) -> float | None:
    """Share of questions whose prediction is the verbatim's slot, before calibration (invalid answers count wrong)."""
    return sum(predicted(r) == r[2] for r in rows) / len(rows) if rows else None
