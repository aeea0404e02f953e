"""Hand-built findings.json entries in the new diagnosis's schema (``findings`` and ``steps``), for the report's
tests until the diagnosis writes them: step 7's reward took 25 s instead of 0.1 s; step 9 lost 3 s in
update_actor; every other step ran at its usual 20.1 s."""

from __future__ import annotations

from typing import Any

REWARD_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PHASE_TRACE = "0af7651916cd43dd8448eb211c80319c"


def _parts(reward: float = 0.1, update_actor: float = 4.0) -> list[dict[str, Any]]:
    usual = {
        "rollout_overhead": 0.3,
        "start": 0.4,
        "preprocess": 0.6,
        "engine_queue": 0.5,
        "prefill": 0.8,
        "decode": 9.0,
        "tool": 1.2,
        "reward": 0.1,
        "gap": 0.2,
        "finish": 0.1,
    }
    value = {**usual, "reward": reward}
    parts = [
        {"kind": k, "value_s": value[k], "baseline_s": usual[k], "seconds": round(value[k] - usual[k], 6),
         "phase": "gen", "workers": [5]}
        for k in usual
    ]  # fmt: skip
    for phase, seconds, usual_s in (("old_log_prob", 1.0, 1.0), ("update_actor", update_actor, 4.0),
                                    ("update_weights", 1.5, 1.5)):  # fmt: skip
        parts.append({"kind": "phase", "phase": phase, "value_s": seconds, "baseline_s": usual_s,
                      "seconds": round(seconds - usual_s, 6)})  # fmt: skip
    parts.append({"kind": "outside_phases", "value_s": 0.4, "baseline_s": 0.4, "seconds": 0.0})
    if reward > 1:
        parts[7]["cause"] = "slow_reward"
        parts[7]["requests"] = ["9b1a8e20-aaaa"]
    return parts


def step_accounts(steps: int = 12) -> list[dict[str, Any]]:
    out = []
    for step in range(1, steps + 1):
        parts = _parts(reward=25.0 if step == 7 else 0.1, update_actor=7.0 if step == 9 else 4.0)
        duration = round(sum(p["value_s"] for p in parts), 6)
        out.append({"step": step, "duration_s": duration, "baseline_s": 20.1, "excess_s": round(duration - 20.1, 6),
                    "parts": parts, "unexplained_s": 0.0})  # fmt: skip
    return out


def new_findings() -> list[dict[str, Any]]:
    return [
        {"kind": "slow_reward", "severity": "critical", "step": 7, "steps": [7], "worker": 5, "workers": [5],
         "seconds": 24.9, "message": "slow reward: worker 5's reward took 25.0 s for request 9b1a8e20-aaaa "
         "(usually 0.1 s); this cost step 7 24.9 s",
         "evidence": [{"trace_id": REWARD_TRACE, "span_id": "00f067aa0ba902b7"}], "trace_ids": [REWARD_TRACE],
         "details": {"scope": "request", "value": 25.0, "baseline": 0.1, "metric": "seconds"}},
        {"kind": "slow_phase", "severity": "warning", "step": 9, "steps": [9], "worker": None, "workers": [],
         "seconds": 3.0, "message": "slow update_actor: the trainer's update_actor took 7.0 s (usually 4.0 s)",
         "evidence": [{"trace_id": PHASE_TRACE, "span_id": "b7ad6b7169203331"}], "trace_ids": [PHASE_TRACE],
         "details": {"scope": "phase", "phase": "update_actor"}},
        {"kind": "long_tail", "severity": "info", "step": None, "steps": [1, 2, 3, 4, 5, 6, 8, 10, 11, 12],
         "workers": [0, 1, 2, 3, 4, 5, 6, 7], "seconds": 0.0, "message": "the barrier took 12 % of rollout time",
         "evidence": [], "trace_ids": [], "details": {"scope": "step"}},
    ]  # fmt: skip


def new_summary() -> dict[str, Any]:
    return {
        "verdict": "2 problems in steps 7 and 9, costing 27.9 s.",
        "headlines": [
            "reward took 25.0 s in step 7, 250× its usual 0.1 s; the step took 46.8 s (usually 20.1 s)",
            "update_actor took 7.0 s in step 9, 1.8× its usual 4.0 s; the step took 23.1 s",
        ],
        "spans": 1000,
        "steps": list(range(1, 13)),
        "workers": list(range(8)),
        "requests": 96,
        "turn_spans": 10,
        "load": {"bad_lines_skipped": 3, "first_bad_lines": ["run/step_4/worker_1.jsonl:17: not JSON"]},
        "missing": {"steps_without_workers": [11, 12], "steps_without_requests": []},
    }
