"""An agent's compiled prompts written for other tools: :mod:`~rosetta.export.promptfoo` (a promptfoo
suite) and the bridge promptfoo calls back through (:mod:`~rosetta.export.promptfoo_bridge`)."""
