"""Option groups: options many commands share, declared once, and handed to each command as one value.

A command declares a parameter of a group's type (`options: ModelOptions = ModelOptions()`, `backend: Backend =
Backend()`) and is decorated with `@option_groups`: the decorator puts the group's options in that parameter's
place in the signature Typer reads (`__signature__`), and builds the value from them when the command runs.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

import typer

from ..deferred import deferred
from ..model.options import ModelOptions, ModelRef
from .app import fail
from .terminal import echo

if TYPE_CHECKING:  # the backends (scoring, torch) load when a command checks its backend: `mia methods` stays light
    from ..model.language_model import LanguageModel
    from ..runs import backends, ray_driver
else:
    backends, ray_driver = deferred("mia_core.runs.backends"), deferred("mia_core.runs.ray_driver")

DeviceOpt = typer.Option("auto", "--device", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps")
DtypeOpt = typer.Option("auto", "--dtype", help="auto (bfloat16 on GPUs that support it, else float16; float32 on CPU "
                        "and MPS), float32, bfloat16, float16 or float64")
MaxMemoryOpt = typer.Option(None, "--max-memory", help="shard the model across devices under a per-device cap, e.g. "
                            "cuda:0=20GiB,cuda:1=20GiB,cpu=30GiB (with --device auto; what fits none is offloaded to "
                            "disk). Without it, auto shards a model too big for the first of several GPUs")
PickleOpt = typer.Option(False, "--allow-pickle", help="allow pickle (.bin) weights: only for trusted sources")
RemoteCodeOpt = typer.Option(False, "--trust-remote-code", help="run the model repository's own code")
BackendOpt = typer.Option("local", "--backend", help="local (this process) or ray (model actors on a Ray cluster; "
                          "the scale extra: pip install \"mia-lens\\[scale]\")")
RayAddressOpt = typer.Option(None, "--ray-address", help="Ray cluster to use with --backend ray (default: $RAY_ADDRESS, "
                             "else a new local instance on this machine)")
RayActorsOpt = typer.Option(None, "--ray-actors", help="model actors with --backend ray (default: one per GPU, "
                            "else one per CPU)")
RayGpusOpt = typer.Option(None, "--ray-gpus-per-actor", help="GPUs each model actor takes with --backend ray (default: "
                          "1 where the cluster has GPUs); an actor shards a model too big for one GPU across its own")


@dataclass(frozen=True)
class Backend:
    """Where statistics are computed (`--backend`, `--ray-address`, `--ray-actors`, `--ray-gpus-per-actor`)."""

    name: str = "local"
    address: str | None = None
    actors: int | None = None
    gpus_per_actor: int | None = None

    @classmethod
    def checked(cls, name: str = "local", address: str | None = None, actors: int | None = None,
                gpus_per_actor: int | None = None) -> Backend:
        """The choice, refused with one clear line when it cannot run (unknown backend, Ray options without Ray)."""
        if name not in backends.BACKENDS:
            fail(f"--backend must be one of {', '.join(backends.BACKENDS)} (got {name!r})")
        if name == "local" and (address or actors):
            fail("--ray-address and --ray-actors need --backend ray")
        if name == "local" and gpus_per_actor is not None:
            fail("--ray-gpus-per-actor needs --backend ray")
        if actors is not None and actors < 1:
            fail(f"--ray-actors must be at least 1 (got {actors})")
        if gpus_per_actor is not None and gpus_per_actor < 1:
            fail(f"--ray-gpus-per-actor must be at least 1 (got {gpus_per_actor})")
        if name == "ray":
            try:
                ray_driver.require_ray()
            except ImportError as err:
                fail(str(err))
        return cls(name, address, actors, gpus_per_actor)

    def driver(self, options: ModelOptions) -> ModelOptions:
        """This process's load options: on the CPU with Ray (it then only fingerprints the model, counts tokens and
        runs methods' own extra passes), leaving this machine's GPUs to the model actors."""
        return options.on_cpu() if self.name == "ray" else options

    def where(self, model: ModelRef) -> dict:
        """The scoring keywords {"backend", "ray_address", "ray_options"}; Ray's workers load `model`."""
        if self.name == "local":
            return {"backend": "local"}
        return {"backend": self.name, "ray_address": self.address,
                "ray_options": ray_driver.RayOptions(actors=self.actors, gpus_per_actor=self.gpus_per_actor,
                                                     model=model)}


@dataclass(frozen=True)
class Group:
    """How a group's value is built (`build(**fields)`) and its options: field → (type, Typer option)."""

    build: Callable[..., Any]
    options: dict[str, tuple[Any, Any]]


#: The option groups, by the type a command's parameter declares.
GROUPS: dict[type, Group] = {
    ModelOptions: Group(ModelOptions, {"device": (str, DeviceOpt), "dtype": (str, DtypeOpt),
                                       "max_memory": (Optional[str], MaxMemoryOpt),
                                       "allow_pickle": (bool, PickleOpt), "trust_remote_code": (bool, RemoteCodeOpt)}),
    Backend: Group(Backend.checked, {"name": (str, BackendOpt), "address": (Optional[str], RayAddressOpt),
                                     "actors": (Optional[int], RayActorsOpt),
                                     "gpus_per_actor": (Optional[int], RayGpusOpt)}),
}


def option_groups(command: Callable[..., Any]) -> Callable[..., Any]:
    """The command with each parameter of a group's type replaced by that group's options (in its place), and the
    group's value built from them when it runs."""
    signature = inspect.signature(command, eval_str=True)
    params, expanded = [], {}
    for param in signature.parameters.values():
        group = GROUPS.get(param.annotation)
        if group is None:
            params.append(param)
            continue
        names = {field: f"{param.name}__{field}" for field in group.options}
        params += [inspect.Parameter(names[field], param.kind, default=option, annotation=kind)
                   for field, (kind, option) in group.options.items()]
        expanded[param.name] = (group, names)

    @functools.wraps(command)
    def run(**values: Any) -> Any:
        for name, (group, names) in expanded.items():
            values[name] = group.build(**{field: values.pop(key) for field, key in names.items()})
        return command(**values)

    run.__signature__ = signature.replace(parameters=params)
    run.__annotations__ = {p.name: p.annotation for p in params}
    return run


def load(spec: str, options: ModelOptions) -> LanguageModel:
    """Load a model with these options, saying so on stderr."""
    echo(f"loading model {spec} …", err=True)
    lm = options.load(spec)
    for warning in getattr(lm, "warnings", []):  # a served model's: every run on it says so
        echo(f"warning: {warning}", err=True)
    return lm
