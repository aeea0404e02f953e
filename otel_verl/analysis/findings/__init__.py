"""Findings stage: one detector per module over the shared tables; :func:`.diagnose.diagnose` runs them
all and ranks the result (the table of modules and the kinds they find is in :mod:`.diagnose`).

:mod:`.record` is the finding itself; :mod:`.thresholds` every tunable limit (``--set name=value``).
"""
