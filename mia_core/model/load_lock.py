"""One transformers load at a time per process: `from_pretrained` patches process-wide state while it builds a
model (empty "meta" weights), so two dashboard sessions loading at once broke each other ("Cannot copy out of meta
tensor"). Loading a model and converting the demo model both hold it."""
from __future__ import annotations

import threading

LOAD_LOCK = threading.RLock()
