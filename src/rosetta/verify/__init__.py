"""``rosetta verify``: behavioral portability across models (PV-011…PV-019), with a report."""
