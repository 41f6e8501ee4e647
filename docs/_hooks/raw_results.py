"""MkDocs hook: the site serves bench/results/*.json under results/, the raw files the performance page links."""
from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def on_files(files: Files, config, **kwargs) -> Files:
    """Add every result file as results/<name>.json, read from bench/results/ (never copied into docs/)."""
    for path in sorted(RESULTS.glob("*.json")):
        files.append(File.generated(config, f"results/{path.name}", abs_src_path=str(path)))
    return files
