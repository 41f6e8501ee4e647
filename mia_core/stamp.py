"""What a result was computed for: model (spec and fingerprint), text (first words and a short hash) and settings.

A page keeps the stamp beside a result, so it can say "computed for model X on text “…” (hash)" when the model or
the text has changed since, and an export carries it so the file says where its numbers came from.
"""
from __future__ import annotations

from dataclasses import dataclass

from .model.identity import text_sha256

#: Characters of the SHA-256 shown to people (enough to tell two texts apart at a glance).
SHORT_HASH = 8


def preview(text: str, words: int = 8) -> str:
    """The first words of a text on one line, with an ellipsis when there are more."""
    head = text.split()
    return " ".join(head[:words]) + (" …" if len(head) > words else "")


@dataclass(frozen=True)
class ResultStamp:
    """A result's model, text and settings: enough to tell whether it still belongs to what the page shows."""

    model: str
    fingerprint: str
    text_sha256: str
    text_preview: str
    bos: str
    settings: tuple[tuple[str, str], ...] = ()
    """Further settings that change numbers, as (name, value) pairs (k, methods' parameters)."""

    @property
    def short_hash(self) -> str:
        return self.text_sha256[:SHORT_HASH]

    def describe(self) -> str:
        """One line: model, fingerprint, text and settings."""
        settings = "".join(f", {name} {value}" for name, value in self.settings)
        return (f"model {self.model} (fingerprint {self.fingerprint[:12]}) on text “{self.text_preview}” "
                f"(sha256 {self.short_hash}), BOS {self.bos}{settings}")

    def changed(self, model: str | None, text: str, bos: str) -> list[str]:
        """What differs now from what the result was computed for, in words (empty: the result is current)."""
        return [what for what, same in (("the model", model == self.model),
                                        ("the text", text_sha256(text) == self.text_sha256),
                                        ("the BOS policy", bos == self.bos)) if not same]


def stamp_for(model: str, fingerprint: str, text: str, bos: str, **settings) -> ResultStamp:
    """The stamp of a result computed now; `settings` values are shown with `format(value, 'g')` when numbers."""
    shown = tuple((name, f"{value:g}" if isinstance(value, float) else str(value)) for name, value in settings.items())
    return ResultStamp(model, fingerprint, text_sha256(text), preview(text), bos, shown)
