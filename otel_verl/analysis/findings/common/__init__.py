"""What every part of the findings stage shares: the names (:mod:`.kinds`), the finding record (:mod:`.record`),
the thresholds (:mod:`.thresholds`), and the statistics they rest on (:mod:`.histograms`, :mod:`.chance`,
:mod:`.series`, :mod:`.row_codes`)."""
