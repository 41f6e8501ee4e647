"""Made-up book text for the book-audit tests: numbered words, so a snippet's position can be read off its text."""
from __future__ import annotations


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))
