"""The seed profiler's logs (``step_<n>/worker_<rank>.jsonl``) read as spans: the second format :mod:`..read` takes.

* :mod:`.log_file` — one log file → checked lines → a worker-step's rows (:mod:`.rows`: the row type, the span
  kinds and the damage rules for a line's fields); :mod:`.arrow` the same with Arrow's JSON reader (the usual file)
* :mod:`.batch` — the one span builder: a worker-step's rows → all its spans (worker → request → turn → event) as
  a batch, who hangs under whom and the span ids decided by :mod:`.tree`; :mod:`.sinks` takes a batch one span
  at a time (OTLP/JSON) or into span-table parts
* :mod:`.convert` — a log directory → spans, file by file in a process pool
* :mod:`.steps` — the logs as a step source for :func:`otel_verl.analysis.read.step_stream.iter_steps`
* :mod:`.events` — the seed's event names and the span kinds they map to (both directions)
"""
