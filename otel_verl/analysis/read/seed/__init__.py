"""The seed profiler's logs (``step_<n>/worker_<rank>.jsonl``) read as spans: the second format :mod:`..read` takes.

* :mod:`.log_file` — one log file → checked lines; :mod:`.arrow` the same with Arrow's JSON reader
* :mod:`.batch` — the one span builder: a worker-step's rows (:mod:`.rows`) → all its spans (worker →
  request → turn → event) as a batch, who hangs under whom decided by :mod:`.tree`; its front ends
  :mod:`.lines` (parsed lines, any damage) and :mod:`.arrow_spans` (Arrow's columns); its sinks
  :mod:`.sinks` (one span at a time: OTLP/JSON; or span-table parts); :mod:`.spans` the ids and field
  rules they share, :mod:`.columns` span-table columns fed span by span
* :mod:`.convert` — a log directory → spans, file by file in a process pool
* :mod:`.steps` — the logs as a step source for :func:`otel_verl.analysis.read.step_stream.iter_steps`
* :mod:`.events` — the seed's event names and the span kinds they map to (both directions)
"""
