"""The seed profiler's logs (``step_<n>/worker_<rank>.jsonl``) read as spans: the second format :mod:`..read` takes.

* :mod:`.seed_read` — one log file → checked lines; :mod:`.seed_arrow` the same with Arrow's JSON reader
* :mod:`.seed_batch` — the one span builder: a worker-step's rows (:mod:`.seed_rows`) → all its spans (worker →
  request → turn → event) as a batch, who hangs under whom decided by :mod:`.seed_tree`; its front ends
  :mod:`.seed_lines` (parsed lines, any damage) and :mod:`.seed_arrow_spans` (Arrow's columns); its sinks
  :mod:`.seed_sinks` (one span at a time: OTLP/JSON; or span-table parts); :mod:`.seed_spans` the ids and field
  rules they share, :mod:`.seed_columns` span-table columns fed span by span
* :mod:`.seed_fast` — a log directory → spans, file by file in a process pool
* :mod:`.seed_steps` — the logs as a step source for :func:`otel_verl.analysis.read.step_stream.iter_steps`
* :mod:`.seed_events` — the seed's event names and the span kinds they map to (both directions)
"""
