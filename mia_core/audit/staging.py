"""A run's snippets staged on disk while its books are read one at a time, with the hashes that name and plan it.

Planning a run hashes every snippet's text before the run has an id, and the results store's transaction should
not wait on the reading of books (a 2 GB source takes minutes). So each book's snippets are written to a
temporary DuckDB file as they are cut, with their text's SHA-256; the run id's hash is updated in plan order as
they go; and the plan's per-role hashes (over the snippets sorted by id) and the rows for the store are read back
from that file in chunks, never held whole.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Iterator

import duckdb
import pandas as pd

from ..model.identity import text_sha256
from ..runs.store import SNIPPET_COLUMNS
from .snippets import Snippet

STAGE_SCHEMA = """CREATE TABLE snippets (snippet_id VARCHAR, book VARCHAR, role VARCHAR, label INTEGER,
                                         position INTEGER, n_words INTEGER, text VARCHAR, sha VARCHAR)"""
#: Characters of snippet text held before they are written to the stage (many small books, one write).
FLUSH_CHARS = 2_000_000
#: DuckDB vectors (2,048 rows each) read back at a time: 2,048 snippets, about 6 MB of 512-word texts.
READ_VECTORS = 1
#: DuckDB's memory for the stage (it spills to the stage's folder beyond it).
STAGE_MEMORY_LIMIT = "64MB"


class SnippetStage:
    """The snippets of a run being planned, in a DuckDB file in `folder`, and the hash `run_digest` of their rows
    in plan order (role, snippet id, label, text hash: the run id's)."""

    def __init__(self, folder: Path, run_digest: "hashlib._Hash") -> None:
        self._con = duckdb.connect(str(folder / "stage.duckdb"), config={"memory_limit": STAGE_MEMORY_LIMIT,
                                                                          "temp_directory": str(folder / "spill")})
        self._con.execute(STAGE_SCHEMA)
        self.run_digest = run_digest
        self.counts: Counter[str] = Counter()
        self._rows: list[tuple] = []
        self._held = 0

    def __enter__(self) -> SnippetStage:
        return self

    def __exit__(self, *exc) -> None:
        self._con.close()

    def add(self, role: str, label: int | None, snippets: list[Snippet]) -> None:
        """Stage one book's snippets (its label on each, None for books to audit) and hash them in order."""
        for s in snippets:
            sha = text_sha256(s.text)
            self.run_digest.update(f"{role}\t{s.snippet_id}\t{'<NA>' if label is None else label}\t{sha}\n".encode())
            self._rows.append((s.snippet_id, s.book, role, label, s.position, s.n_words, s.text, sha))
            self._held += len(s.text)
            if self._held >= FLUSH_CHARS:
                self._flush()
        self.counts[role] += len(snippets)

    def _flush(self) -> None:
        """Write the held rows to the stage."""
        if self._rows:
            frame = pd.DataFrame(dict(zip([*SNIPPET_COLUMNS, "sha"], zip(*self._rows))))  # by columns: faster
            self._rows, self._held = [], 0
            self._con.register("held", frame)
            self._con.execute("INSERT INTO snippets SELECT * FROM held")
            self._con.unregister("held")

    def role_hash(self, role: str) -> str:
        """SHA-256 over the role's (snippet id, label, text hash) lines sorted by snippet id (a run's plan)."""
        self._flush()
        digest = hashlib.sha256()
        result = self._con.execute("SELECT snippet_id, label, sha FROM snippets WHERE role = ? ORDER BY snippet_id",
                                   [role])
        while rows := result.fetchmany(READ_VECTORS * 2048):
            digest.update("".join(f"{i}\t{'' if label is None else label}\t{sha}\n" for i, label, sha in rows).encode())
        return digest.hexdigest()

    def frames(self) -> Iterator[pd.DataFrame]:
        """The staged snippets (`SNIPPET_COLUMNS`) in the order they were added, a chunk at a time."""
        self._flush()
        result = self._con.execute(f"SELECT {', '.join(SNIPPET_COLUMNS)} FROM snippets")
        while len(chunk := result.fetch_df_chunk(READ_VECTORS)):
            yield chunk
