"""`StatsPolicy`: how texts become token statistics (BOS policy, long-text policy), one frozen, validated value."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..names import check_choice

BOS_POLICIES = ("auto", "none")
LONG_TEXT_POLICIES = ("sliding", "truncate")


@dataclass(frozen=True)
class StatsPolicy:
    """The choices that change a text's `TokenStats` besides the model (docs/methods.md, "BOS policy").

    Attributes
    ----------
    bos
        "auto" prepends the document-boundary token so every text token is scored; "none"
        reproduces the Min-K%/Min-K%++ reference code (the first token is unscored).
    long_text
        texts longer than the context are scored in half-overlapping sliding windows
        ("sliding") or cut to the context ("truncate").
    """

    bos: str = "auto"
    long_text: str = "sliding"

    def __post_init__(self) -> None:
        check_choice("BOS policy", self.bos, BOS_POLICIES)
        check_choice("long-text policy", self.long_text, LONG_TEXT_POLICIES)

    def as_kwargs(self) -> dict[str, str]:
        """{"bos": …, "long_text": …} for `LanguageModel.token_stats`."""
        return asdict(self)
