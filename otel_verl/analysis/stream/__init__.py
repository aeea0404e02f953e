"""The analysis a part of a run at a time (issue 31): read, tables, summaries and figure parts per step, the
diagnosis and the report from what the parts left behind; the whole span table is never held.

==============  ================================================================================================
module          job
==============  ================================================================================================
store           :class:`~.store.PartStore`: what each part leaves for the end, pickled in one temporary directory
summaries       :class:`~.summaries.SpilledSummary`: a step's summary whose per-occurrence frames wait in the store
counts          :class:`~.counts.RunCounts`: the counts of findings.json's ``summary``, added up part by part
held            what the report draws of a few parts only: the timelines' steps, the outlier requests
collect         :class:`~.collect.RunCollector`: one part in, everything above out
==============  ================================================================================================

:func:`otel_verl.analysis.pipeline.write_parts` drives it: parts in, findings.json, PNGs and report.html out.
"""
