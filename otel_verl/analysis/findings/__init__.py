"""Findings stage: the step's account and the causes it names, in the order they are computed (each folder imports
only the ones before it; tests/test_layout.py holds it):

* :mod:`.common` — names, the finding record, thresholds, the statistics
* :mod:`.steps` — one step summarized
* :mod:`.account` — the run's norms, what moved in a step, what it cost: the step's account
* :mod:`.causes` — the causes an account names and their severity
* :mod:`.patterns` — what holds across steps and peers (stragglers, trends, behaviour shifts, the long tail)
* :mod:`.quality` — what the trace is missing
* :mod:`.diagnose` runs them all and ranks the result; :mod:`.verdict` says it in a sentence
"""
