"""The seed profiler's logs (``step_<n>/worker_<rank>.jsonl``) read as spans: the second format :mod:`..read` takes.

* :mod:`.seed_read` — one log file → checked lines; :mod:`.seed_arrow` the same with Arrow's JSON reader
* :mod:`.seed_spans` — one worker-step's lines → its spans (worker → request → turn → event);
  :mod:`.seed_arrow_spans` the same spans from Arrow's columns, :mod:`.seed_columns` into span-table columns
* :mod:`.seed_fast` — a log directory → spans, file by file in a process pool
* :mod:`.seed_steps` — the logs as a step source for :func:`otel_verl.analysis.read.step_stream.iter_steps`
* :mod:`.seed_events` — the seed's event names and the span kinds they map to (both directions)
"""
