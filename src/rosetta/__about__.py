"""The one place the package version lives (read by hatch and by `rosetta --version`)."""

__version__ = "0.1.0"
