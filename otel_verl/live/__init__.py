"""The step's account while training runs, in verl's own logger (wandb, mlflow, tensorboard, console …).

The way of a span (docs/live.md has the picture and the metric table, docs/live-details.md the lag)::

    every process   LiveSpanExporter (span_feed.py), behind its own BatchSpanProcessor: lines by step
         │ Ray call, fire-and-forget                 (Ray actor "otel_verl_live:<run>", sink.py)
    beside trainer  LiveCollector (collector.py): lines on disk by step; when the trainer says a step is done
         │          and its spans settled, LiveAccount (account.py, the analyzer's one door) → LiveStep
         │ Ray call the trainer left waiting, read without waiting at its next log call
    trainer         verl's Tracking.log / finish, wrapped (tracking.py) → backends.py → wandb, mlflow, …

``OTEL_VERL_LIVE=false`` turns it off. Names of the metrics: :mod:`.names`; the numbers from findings.json's
shapes: :mod:`.metrics`.
"""
