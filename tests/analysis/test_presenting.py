"""The words report.html and the CLI summary share: severities, step ranges, where, what the input lacked."""

from __future__ import annotations

from accounts import new_findings, new_summary

from otel_verl.analysis.findings.common.record import Finding
from otel_verl.analysis.report import presenting
from otel_verl.invocation import otel_verl_command


def test_severity_counts_in_words() -> None:
    found = presenting.as_dicts(new_findings())
    assert presenting.severity_counts(found) == "1 critical, 1 warning, 1 info"
    assert presenting.severity_counts([{"severity": "warning"}] * 2) == "2 warnings"
    assert presenting.severity_counts([]) == "none"


def test_number_ranges_and_where() -> None:
    assert presenting.number_ranges([9, 1, 3, 4, 5]) == "1, 3-5, 9"
    assert presenting.steps_words([7]) == "step 7" and presenting.steps_words([3, 4]) == "steps 3-4"
    reward, phase, tail = presenting.as_dicts(new_findings())
    assert presenting.where(reward) == "worker 5"
    assert presenting.where(phase) == "the trainer (phase update_actor)"
    # a cause of the whole step names every worker, whatever its `workers` list holds (was "worker 0 (the whole
    # step)" beside a message saying "all 2 workers")
    assert presenting.where(tail) == "every worker (the whole step)"
    assert presenting.where({**tail, "workers": [0]}) == "every worker (the whole step)"


def test_old_findings_read_as_dicts() -> None:
    f = Finding("idle_gap", "critical", "stalled", "gap_s", 20.0, step=3, worker=1, seconds=19.5,
                evidence=[{"trace_id": "a" * 32, "span_id": "b" * 16}])  # fmt: skip
    (d,) = presenting.as_dicts([f])
    assert d["steps"] == [3] and d["workers"] == [1] and d["trace_ids"] == ["a" * 32]


def test_missing_parts_and_the_open_command() -> None:
    missing = presenting.missing_parts(new_summary())
    assert missing[0].startswith("3 bad lines were skipped") and "worker_1.jsonl:17" in missing[0]
    assert missing[1] == "no worker spans in steps 11-12: the rollout there is unseen"
    assert presenting.missing_parts({"load": {"bad_lines_skipped": 0}, "missing": {}}) == []
    assert presenting.open_step_command("/runs/my spool", [7]) == (
        f"{otel_verl_command()} export-perfetto '/runs/my spool' --steps 7:7 --out step7.pftrace"
    )  # otel-verl spelled as the user's shell runs it: tests/analysis/test_hint_commands.py
