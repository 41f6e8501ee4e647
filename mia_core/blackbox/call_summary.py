"""What one stored exchange says, read from its bytes alone: the identifiers the API answered with, why it stopped, its
`usage`, and its classification (METHODS-API.md §24, "Per call"). A pure function, so `mia verify` recomputes it."""
from __future__ import annotations

from ..model.chat.answers import AnswerError, ChatAnswer, parse_answer
from .responses import classify


def read_answer(status: int | None, response: bytes, api: str) -> ChatAnswer | None:
    """The parsed answer of a 200 exchange, None for any other (no answer, an HTTP error, an unreadable body)."""
    if status != 200:
        return None
    try:
        return parse_answer(response, api)
    except AnswerError:
        return None


def call_summary(status: int | None, response: bytes, api: str, *, refusal_scope: str = "all") -> dict:
    """The record's summary of one exchange: model as returned, ids, finish reason, usage, classification with the
    matched refusal pattern and its offset (an exchange without a readable answer is classified "error")."""
    if status != 200:
        return {"classification": "error", "error": "no answer" if status is None else f"HTTP {status}"}
    try:
        answer = parse_answer(response, api)
    except AnswerError as err:
        return {"classification": "error", "error": str(err)}
    verdict = classify(answer.text, answer.finish_reason, refusal_scope=refusal_scope)
    return {"model": answer.model, "id": answer.answer_id, "system_fingerprint": answer.system_fingerprint,
            "created": answer.created, "finish_reason": answer.finish_reason,
            "usage": {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens},
            "classification": verdict.kind, "pattern": verdict.pattern, "offset": verdict.offset}
