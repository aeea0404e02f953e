"""The diagnosis's accuracy benchmark (issue 29): simulated verl runs with planted causes, and their scoring.

One job per module, in the order a run goes through them:

* :mod:`.shape` — a run's random shape (workers, steps, turns, lengths, format …)
* :mod:`.draws` — every random number of the undisturbed run, drawn once
* :mod:`.effects` — planted causes and what each changes in a step
* :mod:`.simulate` — one worker's timeline from its draws and the effects
* :mod:`.steps` — a step's timeline (workers, barrier, trainer phases) and its duration per format
* :mod:`.planting` — which causes a run gets, where, and how big (sized against the run's spread)
* :mod:`.run_model` — a whole run: shape, draws, plants, its timelines and the clean twin's
* :mod:`.write_otlp` / :mod:`.write_seed` — the run as a spool (our span contract) or as seed logs
* :mod:`.matching` / :mod:`.scoring` / :mod:`.tables` — findings.json against the ground truth, and the rates

``benchmarks/bench_diagnosis.py`` runs it; docs/diagnosis-benchmark.md describes the method.
"""
