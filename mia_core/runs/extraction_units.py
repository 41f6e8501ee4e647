"""Extraction units in the results store: a book audit's extraction windows as units of work, claimed and committed
one unit at a time, so a killed extraction resumes with only its unfinished units redone and two processes split it.

A unit is a run of consecutive windows of one book (`UNIT_WINDOWS` of them, the last unit of a book fewer), not one
window: a window's result is two numbers, and a row, a claim and a commit per window would cost the store more than
the model costs the window (a 100,000-token book at stride 10 is 10,000 windows; a catalogue, millions of rows and
claims), while a unit of a few hundred windows is one forward batch or a few, as a snippet batch is. A unit holds
what a worker needs to compute it without the tokenizer or the text — the token ids its windows span and where each
window starts — and, apart, where its windows lie in the book's characters (for the figures). A finished unit's row
in `extraction_results` holds log10 p_z and the greedy flag of each of its windows. Claims are the snippets' claims
(`runs.claims`), over units. Tables: `extraction_books` (each book's text, role, label and token count, for the
figures), `extraction_units`, `extraction_results` (their schema is `store_db`'s); the run itself is a row of `runs`
(kind "book-extraction").
"""
from __future__ import annotations

import io
from typing import Sequence

import numpy as np
import pandas as pd

from pathlib import Path

from . import claims
from .store_db import connect, now, transaction

KIND = "book-extraction"
#: Windows per unit: 256 windows of 101 tokens fed (the paper's 50 + 50 and a lead token) are ≈ 26,000 token-passes,
#: a few seconds of the demo model on 2 CPU cores — what a killed run loses at most, and a claim's granularity.
UNIT_WINDOWS = 256


def pack(**arrays: np.ndarray) -> bytes:
    """Arrays as npz bytes (no pickles)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def unpack(payload: bytes) -> dict[str, np.ndarray]:
    """The arrays packed by `pack`."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


class ExtractionUnits:
    """The extraction tables of the results store at `path` (`ResultsStore` makes them; this reads and writes them)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def clear_unplanned(self, run_id: str) -> None:
        """Drop books and units of a run id without a run row (a planning killed before its end)."""
        with connect(self.path) as con, transaction(con):
            if con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone() is None:
                con.execute("DELETE FROM extraction_units WHERE run_id = ?", [run_id])
                con.execute("DELETE FROM extraction_books WHERE run_id = ?", [run_id])

    def add_book(self, run_id: str, book: dict, units: pd.DataFrame) -> None:
        """One book's row (book, role, label, position, n_text_tokens, text) and its units (`unit_rows`), together."""
        books = pd.DataFrame([{"run_id": run_id, **book}])[["run_id", "book", "role", "label", "position",
                                                              "n_text_tokens", "text"]]
        with connect(self.path) as con, transaction(con):
            con.register("new_book", books)
            con.execute("INSERT INTO extraction_books SELECT * FROM new_book b WHERE NOT EXISTS "
                        "(SELECT 1 FROM extraction_books e WHERE e.run_id = b.run_id AND e.book = b.book)")
            frame = units.copy()
            frame.insert(0, "run_id", run_id)
            con.register("new_units", frame)
            con.execute("INSERT INTO extraction_units SELECT * FROM new_units u WHERE NOT EXISTS (SELECT 1 FROM "
                        "extraction_units e WHERE e.run_id = u.run_id AND e.unit_id = u.unit_id)")

    def pending_ids(self, run_id: str) -> list[str]:
        """Ids of the run's units without a stored result, in book order."""
        with connect(self.path) as con:
            rows = con.execute("""SELECT u.unit_id FROM extraction_units u JOIN extraction_books b USING (run_id, book)
                                  WHERE u.run_id = ? AND NOT EXISTS (SELECT 1 FROM extraction_results r
                                  WHERE r.run_id = u.run_id AND r.unit_id = u.unit_id)
                                  ORDER BY b.position, u.position""", [run_id]).fetchall()
        return [r[0] for r in rows]

    def claim(self, run_id: str, session: str, ids: Sequence[str]) -> list[str]:
        """Claim those of `ids` with no result and no live claim, for `session` (`runs.claims`)."""
        with connect(self.path) as con, transaction(con):
            return claims.claim(con, run_id, session, ids, done=claims.EXTRACTION_DONE)

    def release(self, run_id: str, session: str) -> None:
        """Drop `session`'s claims on the run (what it did not compute is pending for others again)."""
        with connect(self.path) as con:
            claims.release(con, run_id, session)

    def work(self, run_id: str, ids: Sequence[str]) -> list[dict[str, np.ndarray]]:
        """What a worker needs for each unit, in the order asked: `ids` (the token ids its windows span, int64) and
        `starts` (each window's first token, in those ids)."""
        with connect(self.path) as con:
            found = dict(con.execute("SELECT unit_id, work FROM extraction_units WHERE run_id = ? AND unit_id IN "
                                     f"({', '.join('?' * len(ids))})", [run_id, *ids]).fetchall()) if ids else {}
        return [unpack(found[i]) for i in ids]

    def write_result(self, run_id: str, unit_id: str, log10_pz: np.ndarray, greedy: np.ndarray, session: str) -> None:
        """Commit one unit's windows' results and the run's heartbeat, and release the session's claim on it."""
        stamp = now()
        frame = pd.DataFrame([{"run_id": run_id, "unit_id": unit_id, "session": session, "computed_at": stamp,
                               "result": pack(log10_pz=np.asarray(log10_pz, np.float64),
                                              greedy=np.asarray(greedy, bool))}])
        with connect(self.path) as con, transaction(con):
            con.register("new_result", frame[["run_id", "unit_id", "result", "session", "computed_at"]])
            con.execute("INSERT INTO extraction_results SELECT * FROM new_result n WHERE NOT EXISTS (SELECT 1 FROM "
                        "extraction_results r WHERE r.run_id = n.run_id AND r.unit_id = n.unit_id)")
            con.execute("UPDATE runs SET heartbeat = ? WHERE run_id = ?", [stamp, run_id])
            claims.release(con, run_id, session, [unit_id])

    def progress(self, run_id: str) -> tuple[int, int]:
        """(units computed, units planned) of a run."""
        with connect(self.path) as con:
            planned = con.execute("SELECT count(*) FROM extraction_units WHERE run_id = ?", [run_id]).fetchone()[0]
            done = con.execute("SELECT count(*) FROM extraction_results WHERE run_id = ?", [run_id]).fetchone()[0]
        return int(done), int(planned)

    def books(self, run_id: str) -> pd.DataFrame:
        """The run's books (book, role, label, n_text_tokens, text) in plan order."""
        with connect(self.path) as con:
            return con.execute("SELECT book, role, label, n_text_tokens, text FROM extraction_books WHERE run_id = ? "
                               "ORDER BY position", [run_id]).df()

    def book_windows(self, run_id: str, book: str) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, list]:
        """A book's windows in order: (their spans, log10 p_z, greedy, the result rows' (session, computed_at))."""
        with connect(self.path) as con:
            rows = con.execute("""SELECT u.spans, r.result, r.session, r.computed_at FROM extraction_units u
                                  JOIN extraction_results r USING (run_id, unit_id)
                                  WHERE u.run_id = ? AND u.book = ? ORDER BY u.position""", [run_id, book]).fetchall()
        spans = [unpack(r[0]) for r in rows]
        results = [unpack(r[1]) for r in rows]
        names = spans[0].keys() if spans else ()
        joined = {name: np.concatenate([s[name] for s in spans]) for name in names}
        log10_pz = np.concatenate([r["log10_pz"] for r in results]) if results else np.empty(0)
        greedy = np.concatenate([r["greedy"] for r in results]) if results else np.empty(0, bool)
        return joined, log10_pz, greedy, [(r[2], r[3]) for r in rows]

    def results_frame(self, run_id: str) -> pd.DataFrame:
        """Every stored unit result's (unit_id, session, computed_at), for checks that nothing was recomputed."""
        with connect(self.path) as con:
            return con.execute("SELECT unit_id, session, computed_at FROM extraction_results WHERE run_id = ? "
                               "ORDER BY unit_id", [run_id]).df()

    def runs_for(self, audit_run: str) -> pd.DataFrame:
        """Extraction runs made beside a book-audit run (config's audit_run), newest first: run_id, status, config."""
        with connect(self.path) as con:
            return con.execute("SELECT run_id, status, config, created_at FROM runs WHERE kind = ? AND "
                               "json_extract_string(config, '$.audit_run') = ? ORDER BY created_at DESC",
                               [KIND, audit_run]).df()


def unit_rows(book: str, starts: np.ndarray, ids: np.ndarray, spans: dict[str, np.ndarray], window: int,
              unit_windows: int = UNIT_WINDOWS) -> pd.DataFrame:
    """A book's windows cut into units of `unit_windows` consecutive windows (columns of `extraction_units` but
    run_id): each with the token ids its windows span and their starts in them, and the windows' spans."""
    rows = []
    for k, first in enumerate(range(0, len(starts), unit_windows)):
        part = starts[first : first + unit_windows]
        lo, hi = int(part[0]), int(part[-1]) + window
        rows.append({"unit_id": f"{book}#{k:06d}", "book": book, "position": k, "first_window": first,
                     "n_windows": len(part), "work": pack(ids=ids[lo:hi].astype(np.int64), starts=part - lo),
                     "spans": pack(**{name: values[first : first + unit_windows] for name, values in spans.items()})})
    return pd.DataFrame(rows, columns=["unit_id", "book", "position", "first_window", "n_windows", "work", "spans"])
