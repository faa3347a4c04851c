"""``python -m rosetta.cli``: the ``rosetta`` command."""

from rosetta.cli import main

main()
