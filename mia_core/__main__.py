"""`python -m mia_core …` runs the `mia` command line."""
from .cli import main

main()
