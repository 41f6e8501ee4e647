"""`ModelOptions` (how a model is loaded) and `ModelRef` (which model, and how): what a job carries instead of a
loaded model, so the same reference is loaded here, by a Ray worker elsewhere, or by a later run that resumes it."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..deferred import deferred
from .builtin import BUILTIN_NAMES
from .memory_map import parse_max_memory

if TYPE_CHECKING:  # the loader (torch, transformers) loads with the first model: options alone stay light
    from . import loading
    from .language_model import LanguageModel
else:
    loading = deferred("mia_core.model.loading")


@dataclass(frozen=True)
class ModelOptions:
    """How a model is loaded: the `load_model` options (the command line's `--device`, `--dtype`, `--max-memory`,
    `--allow-pickle`, `--trust-remote-code`; `max_length` caps the context, None: the model's own)."""

    device: str = "auto"
    dtype: str = "auto"
    allow_pickle: bool = False
    trust_remote_code: bool = False
    max_length: int | None = None
    max_memory: str | None = None
    """Per-device cap ("cuda:0=20GiB,cuda:1=20GiB,cpu=30GiB"): the model is sharded across these devices."""

    def __post_init__(self) -> None:
        """A cap that cannot be read is refused here, before any model is loaded (ValueError)."""
        parse_max_memory(self.max_memory)

    def load(self, spec: str) -> LanguageModel:
        """The model named by `spec`, loaded with these options."""
        return loading.load_model(spec, **dataclasses.asdict(self))

    def on_cpu(self) -> ModelOptions:
        """These options on the CPU, whole (a driver that leaves the machine's GPUs to model workers)."""
        return dataclasses.replace(self, device="cpu", max_memory=None)


@dataclass(frozen=True)
class ModelRef:
    """Which model (`spec`: "demo", "demo-known", a local folder or a hub id) and how it is loaded (`options`)."""

    spec: str
    options: ModelOptions = field(default_factory=ModelOptions)

    def load(self) -> LanguageModel:
        """The model, loaded in this process."""
        return self.options.load(self.spec)

    def portable(self) -> ModelRef:
        """This reference with a local folder as an absolute path, for processes that run elsewhere (Ray workers)."""
        path = Path(self.spec).expanduser()
        if self.spec in BUILTIN_NAMES or not path.is_dir():
            return self
        return dataclasses.replace(self, spec=str(path.resolve()))

    @classmethod
    def of(cls, lm: LanguageModel) -> ModelRef:
        """The reference that reproduces a loaded model's numbers elsewhere: its spec, dtype and context (the device
        is the loader's own choice)."""
        dtype = str(lm.dtype).removeprefix("torch.")
        return cls(lm.spec, ModelOptions(dtype=dtype, max_length=lm.max_length))
