"""The `mia` command line: one module per command group, each imported only when its command runs (`app.py`)."""
from .app import app, main

__all__ = ["app", "main"]
