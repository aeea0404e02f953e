"""One step summarized, whatever the run around it: its occurrences, groups, phases and stretches of nothing moving
(:mod:`.step_summary`), the per-group statistics (:mod:`.step_statistics`); what a streamed run keeps per step."""
