"""The `mia` command line starts light: `mia --help` imports no model library, every command still answers
`--help` with the same options as before the lazy group, flags read as flags, every option says what it does."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer import _click
from typer.core import TyperGroup, TyperOption

import mia_core
from mia_core.cli import app
from mia_core.cli.app import COMMANDS
from mia_core.cli.lazy import module_group

from tests.support.cli_runner import run_cli

#: Every command and its parameters, in order: as before the command line became lazy (commit 63ea285), with the
#: deliberate changes since: `--a` gone (`--param a=…`); `mia methods` and `mia freq build` take the model options
#: (`methods --model` lists what a model allows); GDS named nowhere: `eval --fit/--fit-seed` fits every chosen
#: supervised method (`--param max_tokens=…`), `mia fit --method` replaces `gds fit`, `gds eval` is `eval --fit`;
#: `mia compare` added (issue 29: two runs' scores as a paired test); `mia extract` added (issue 26: extraction);
#: `audit-books --pdf` (issue 29: the report as PDF) and `--extraction` with its window settings, `demo build --traps`
#: (issue 26); `--max-memory` with the model options and `--ray-gpus-per-actor` with the Ray ones (issue 25: sharding);
#: `mia app` added (issue 42: the dashboard from an installed package); `mia paraphrase` and `mia decop-books` added (issue 43:
#: DE-COP);
#: `extract --tokenizer` (issue 40: the GL bound per window).
BEFORE = {
    "score": "--model --input --output --methods --k --text-column --bos --long-text --ref-model --freq --param "
             "--shots-nonmembers --shots-members --reference --device --dtype --max-memory --allow-pickle --trust-remote-code "
             "--backend --ray-address --ray-actors --ray-gpus-per-actor",
    "eval": "--model --input --output --methods --label-column --text-column --k --bos --long-text --ref-model --freq "
            "--n-boot --seed --per-class --fit --fit-seed --scores-output --param "
            "--shots-nonmembers --shots-members --reference --n-shots --reference-fraction --helper-seed --device "
            "--dtype --max-memory --allow-pickle --trust-remote-code --backend --ray-address --ray-actors --ray-gpus-per-actor",
    "extract": "--model --input --output --summary --prefix --suffix --stride --top-k --temperature --text-column --bos --windows "
               "--samples --per-request --greedy-repeats --budget --store --run-id --tokenizer "
               "--device --dtype --max-memory --allow-pickle --trust-remote-code",
    "extract-books": "--model --books --control --output-dir --profile --max-tokens --max-turns --probe-tokens "
                     "--refusal-scope --context-tokens --budget --store --run-id --operator --pdf --estimate",
    "paraphrase": "--model --books --output --passages --passage-words --author --budget --store --run-id",
    "decop-books": "--model --books --clean --output-dir --paraphrases-from --letters --tokenizer --beside --budget --store --run-id "
                   "--operator --pdf --estimate",
    "verify": "RUN_ID --store",
    "compare": "FIRST SECOND --by --n-boot --seed",
    "heatmap": "--model --input --output --methods --k --bos --scale --param --device --dtype --max-memory --allow-pickle "
               "--trust-remote-code",
    "dataset-inference": "--model --suspect --validation --output --text-column --shuffles --seed --alpha --max-train "
                         "--epochs --lowercase/--no-lowercase --ref-model --bos --long-text --device --dtype --max-memory "
                         "--allow-pickle --trust-remote-code",
    "datasets": "",
    "methods": "--model --device --dtype --max-memory --allow-pickle --trust-remote-code",
    "audit-books": "--model --calibration --books --output-dir --pdf --method --k --param --freq --snippet-words "
                   "--max-snippets-per-book --rule --target-fpr --bos --seed --n-boot --store --job-id --batch-snippets "
                   "--extraction --prefix --suffix --stride --top-k --temperature --device --dtype --max-memory --allow-pickle --trust-remote-code --backend --ray-address --ray-actors --ray-gpus-per-actor",
    "audit-online": "--model --input --output --window --stride --method --k --label-column --text-column --bos "
                    "--device --dtype --max-memory --allow-pickle --trust-remote-code",
    "audit-unlearning": "--original --unlearned --input --output --chunk-words --method --k --band --text-column --bos "
                        "--device --dtype --max-memory --allow-pickle --trust-remote-code",
    "freq build": "--model --output --corpus MORE --text-field --device --dtype --max-memory --allow-pickle --trust-remote-code",
    "demo build": "--seed --output-dir --epochs --lr --traps",
    "fit": "--model --method --input --output --train-fraction --seed --label-column --text-column --bos "
           "--batch-tokens --param --device --dtype --max-memory --allow-pickle --trust-remote-code",
    "reference build": "--model --input --output --methods --k --text-column --bos --long-text --param --device "
                       "--dtype --max-memory --allow-pickle --trust-remote-code",
    "reference show": "FOLDER",
    "models check": "SPEC",
    "cache info": "",
    "cache clear": "",
    "app": "--address --port",
}
FLAGS = {"--allow-pickle", "--trust-remote-code", "--lowercase/--no-lowercase"}

HELP_THEN_MODULES = """
import contextlib, io, sys
sys.argv = ["mia", "--help"]
from mia_core.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main()
    except SystemExit:
        pass
print(" ".join(m for m in ("torch", "transformers", "pandas", "mia_core.model", "mia_core.cli.score") if m in sys.modules))
print(out.getvalue())
"""


def commands() -> dict[str, _click.Command]:
    """Every leaf command under `mia`, by its path ("gds fit"), importing every command module."""
    found: dict[str, _click.Command] = {}

    def walk(command: _click.Command, path: list[str]) -> None:
        if isinstance(command, TyperGroup):
            ctx = _click.Context(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])
        else:
            found[" ".join(path)] = command

    walk(app, [])
    return found


def param_name(param: _click.Parameter) -> str:
    """`--lowercase/--no-lowercase` for an option, `FOLDER` for an argument."""
    return "/".join(param.opts + param.secondary_opts) if isinstance(param, TyperOption) else param.name.upper()


def test_help_imports_no_model_library_and_lists_every_command():
    done = subprocess.run([sys.executable, "-c", HELP_THEN_MODULES], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    loaded, _, shown = done.stdout.partition("\n")
    assert loaded == ""  # none of torch, transformers, pandas, the model code or a command module
    listed = [line.split()[1] for line in shown.splitlines() if line.startswith("│ ") and line.split()[1] in COMMANDS]
    assert listed == list(COMMANDS)
    assert "<bool>" not in shown


METHODS_THEN_MODULES = """
import contextlib, io, sys
sys.argv = ["mia", "methods"]
from mia_core.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    main()
print(" ".join(m for m in ("torch", "transformers", "pandas", "scipy.stats", "wordfreq", "mia_core.model.language_model")
               if m in sys.modules))
print(out.getvalue(), end="")
"""


def test_methods_lists_the_registry_without_a_model_library():
    done = subprocess.run([sys.executable, "-c", METHODS_THEN_MODULES], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded, _, listed = done.stdout.partition("\n")
    assert loaded == ""  # the declarations load no engine (mia_core.deferred)
    from mia_core.cli.methods import method_lines
    from mia_core.methods import METHODS
    assert listed == "".join("\n".join(method_lines(spec)) + "\n" for spec in METHODS.values())
    names = [line.split()[0] for line in listed.splitlines() if not line.startswith(" ")]
    assert names == list(METHODS) and len(names) > 10  # every registered method, each once


def test_import_mia_core_is_light_and_its_names_load_on_use():
    code = ("import sys, mia_core; light = 'torch' not in sys.modules; "
            "from mia_core import METHODS, score_texts, datasets; "
            "from mia_core.scoring import STATS_BACKENDS; "
            "print(light, 'min_k_pp' in METHODS, callable(score_texts), datasets.__name__, sorted(STATS_BACKENDS))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["True", "True", "True", "mia_core.inputs.datasets", "['local',", "'ray']"], done.stderr
    assert set(mia_core.__all__) == set(mia_core.EXPORTS) | {"__version__"}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        mia_core.nope


def test_every_command_keeps_its_options():
    found = commands()
    assert list(found) == list(BEFORE)
    for path, command in found.items():
        assert " ".join(map(param_name, command.params)) == BEFORE[path], path


def test_every_option_says_what_it_does():
    missing = [f"{path} {param_name(p)}" for path, command in commands().items() for p in command.params
               if not (getattr(p, "help", None) or "").strip()]
    assert missing == []


def test_the_listing_matches_each_commands_own_help():
    ctx = _click.Context(app)
    for name, entry in COMMANDS.items():
        command = module_group(entry.module).get_command(ctx, name)
        assert " ".join(command.help.split("\n\n")[0].split()) == entry.help, name


@pytest.mark.parametrize("path", list(BEFORE))
def test_every_command_answers_help_with_flags_as_flags(path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps help to the terminal width; keep each option on one line
    code, out, err = run_cli(*path.split(), "--help")
    assert code == 0, err
    assert "<bool>" not in out
    for name in BEFORE[path].split():
        if name.startswith("--"):
            assert all(part in out for part in name.split("/")), (path, name)
    flags = [name for name in BEFORE[path].split() if name in FLAGS]
    for flag in flags:  # a flag's row has no type column: the next thing after it is its help text
        row = next(line for line in out.splitlines() if flag.split("/")[0] + " " in line)
        assert "<" not in row, row
