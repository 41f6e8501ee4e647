"""What a book audit is run with (`AuditSettings`), shared by its planning, scoring and analysis."""
from __future__ import annotations

from dataclasses import dataclass, field

#: The kind of run a book audit is in the results store.
KIND = "book-audit"


@dataclass(frozen=True)
class AuditSettings:
    """Everything a book audit is run with. `params` are the method's parameters (e.g. k)."""

    method: str = "min_k_pp"
    params: dict = field(default_factory=lambda: {"k": 0.2})
    snippet_words: int = 512
    max_snippets_per_book: int | None = None
    bos: str = "auto"
    rule: str = "fpr"
    target_fpr: float = 0.05
    seed: int = 0
    n_boot: int = 1000
    ci: float = 0.95
    batch_snippets: int = 16
    #: What the calibration and the audited books were named by: a built-in set or the path the command line was
    #: given ('' for a dashboard upload, which has no name to repeat); the repeat command names them.
    calibration_source: str = ""
    books_source: str = ""

    def scoring_key(self) -> dict:
        """The settings that change snippet scores (the rest only change the analysis)."""
        return {"method": self.method, "params": self.params, "snippet_words": self.snippet_words, "bos": self.bos,
                "max_snippets_per_book": self.max_snippets_per_book}
