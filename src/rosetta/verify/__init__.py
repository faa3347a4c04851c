"""``rosetta verify``: behavioral portability across models (PV-011…PV-018), with a report."""
