"""Run time: choosing the compiled prompt for the active model (and, later, invoking it)."""
