"""Issue 51 on the README's demo (scripts/demo.sh, --plant stall): one cause, one name, and no echo told as a cause.

The planted stall was "stall (cost 18.7 s)" in the tables but ``"kind": "slow_decode"`` in findings.json; beside it
causes #3-#5 named a request of worker 0 "the request that ended the rollout" (it ran 0.06-2.17 s of a rollout
that the stalled requests ended at 20.9 s: it ends the rollout only once the stall is taken away) and a 0.31 s
stall of its own, both a few tenths of a second on the worker that stood still 18 s. Driven through the real
naming, message and table code (no run needed: the demo's own run is tests/test_readme_demo.py)."""

from __future__ import annotations

import pandas as pd
from typer.testing import CliRunner

from otel_verl.analysis.findings.causes import naming
from otel_verl.analysis.findings.causes.cause import Cause
from otel_verl.analysis.findings.causes.messages import describe
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import Finding
from otel_verl.analysis.findings.common.step_cause import as_stall, cause_name
from otel_verl.analysis.report.step_rows import cause_words
from otel_verl.cli import app

REQ = pd.DataFrame({"request_id": ["b02dead"], "span_id": ["s1"], "request_span": [7], "status": ["completed"]})


def _tail(ended: bool) -> Finding:
    details = {"tail": True, "scope": k.SCOPE_REQUEST, "turns": 3, "ended_rollout": ended, "part": "preprocess"}
    return Finding(k.SLOW_PREPROCESS, "info", "", value=0.73, baseline=0.39, step=2, worker=0, details=details)


def test_the_usual_paths_request_is_not_said_to_have_ended_a_rollout_a_stall_ended() -> None:
    held = _tail(ended=False)
    held.details |= {"value": 0.73, "usual": 0.39}
    text = describe(held, None, REQ)  # type: ignore[arg-type]  # a request's cause reads no account
    assert "the request that would have ended the rollout but for the causes above (3 turns)" in text, text
    assert "that ended the rollout" not in text, text
    ended = _tail(ended=True)
    ended.details |= {"value": 0.73, "usual": 0.39}
    assert "the request that ended the rollout (3 turns)" in describe(ended, None, REQ)  # type: ignore[arg-type]


def test_small_causes_on_the_stalled_worker_are_the_stalls_echo() -> None:
    """The demo's stall is a slow decode told as its worker's stall: the usual path's +0.33 s on that worker and a
    0.31 s stall costing 0.10 s there are notes (``stall_echo``); the other worker's cause and the stall are not."""
    stall = Cause(k.SLOW_DECODE, k.SCOPE_SAMPLE, "3", 2, 18.6, k.PART_DECODE, [0], details={"stalled_s": 18.3})
    tail = Cause(k.SLOW_PREPROCESS, k.SCOPE_REQUEST, "", 2, 0.33, k.PART_PREPROCESS, [0], details={"tail": True})
    short = Cause(k.STALL, k.SCOPE_WORKER, "0", 2, 0.10, k.PART_ENGINE_AFTER, [0], details={})
    other = Cause(k.SLOW_REWARD, k.SCOPE_WORKER, "1", 2, 0.4, k.PART_REWARD, [1], details={})
    later = Cause(k.SLOW_TOOL, k.SCOPE_WORKER, "0", 3, 0.2, k.PART_TOOL, [0], details={})
    naming._mark_stall_echoes([stall, tail, short, other, later])
    assert tail.details.get("stall_echo") and short.details.get("stall_echo")
    assert not any(c.details.get("stall_echo") for c in (stall, other, later))


def test_a_stall_has_one_name_in_findings_json_the_tables_and_demo_help() -> None:
    details = {
        "stalled_s": 18.3,
        "part": k.PART_DECODE,
        "scope": k.SCOPE_SAMPLE,
        "sample_index": "3",
        "by_engine": True,
    }
    details |= {"metric": "rate", "value": 0.31, "usual": 0.00077, "ratio": 401.3}
    kind = as_stall(k.SLOW_DECODE, details)
    assert (kind, details["engine_kind"]) == (k.STALL, k.SLOW_DECODE)
    f = Finding(kind, "critical", "", step=2, worker=0, seconds=18.6, details=details)
    text = describe(f, None, REQ)  # type: ignore[arg-type]
    assert (
        text.startswith("worker 0 stalled in step 2") and "the engine's own account puts the time in decoding" in text
    )
    record = f.to_json()
    assert record["kind"] == cause_name(record) == "stall" and cause_words(record | {"name": None}).startswith(
        "stall (cost 18.6 s)"
    )
    # a cause that did not hold its worker still keeps its kind, and a stall of its own kind has no engine_kind
    plain = {"part": k.PART_DECODE, "scope": k.SCOPE_WORKER}
    assert as_stall(k.SLOW_DECODE, plain) == k.SLOW_DECODE and "engine_kind" not in plain
    helped = " ".join(CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "stalls SEC s in the engine (told as a stall)" in helped and "idle gap" not in helped, helped[:2000]
