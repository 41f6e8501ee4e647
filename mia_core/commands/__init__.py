"""Further `mia` sub-commands, one module per job (audits, heavy methods).

Each module adds its commands to `mia_core.cli.app`; importing this package (done at the end of
`mia_core.cli`) imports every module here, so a new command is one new file.
"""
import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
