"""The analyzer on real traces: the CPU demo with a planted stall, found and named."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    pytest.importorskip("verl")
    from otel_verl.analysis.load import load_spans
    from otel_verl.analysis.report import analyze
    from otel_verl.demo.runner import DemoOptions, run_demo
    from otel_verl.export import setup

    setup.reset_for_tests()
    spool = tmp_path_factory.mktemp("planted")
    # sample 3 (rows 6-7 of 16: worker 0's chunk) stalls 8 s on its first engine call, in step 2 only
    opts = DemoOptions(steps=3, workers=2, prompts=8, n=2, ray_cpus=2, spool=str(spool), stall={3: 8.0}, slow_step=2)
    result = run_demo(opts)
    setup.reset_for_tests()
    out = tmp_path_factory.mktemp("report")
    analysis = analyze(load_spans(result.spool_dir), out)
    return opts, analysis, out


def test_planted_stall_is_found_and_named(planted_run):
    _, analysis, _ = planted_run
    serious = [f for f in analysis.findings if f.severity in ("warning", "critical")]
    assert serious
    # the stall sits inside the engine call of sample 3's two rollouts: worker 0, step 2, ~8 s
    culprits = [f for f in serious if f.kind in ("slow_event", "turn_anomaly")]
    assert culprits and {(f.step, f.worker) for f in culprits} == {(2, 0)}
    assert all(7.5 <= f.value <= 12.0 for f in culprits)
    assert all("worker 0" in f.message and "step 2" in f.message for f in culprits)
    assert all(f.evidence and f.request_id for f in culprits)
    # the step's slowest request is one of them, with the engine call named as what dominated it
    tails = [f for f in analysis.findings if f.kind == "tail_request" and f.step == 2]
    assert tails and tails[0].request_id in {f.request_id for f in culprits}
    assert "engine" in tails[0].message
    data = json.loads((planted_run[2] / "findings.json").read_text())
    order = {"critical": 0, "warning": 1, "info": 2}
    assert [order[f["severity"]] for f in data["findings"]] == sorted(order[f["severity"]] for f in data["findings"])


def test_report_files_written(planted_run):
    _, _, out = planted_run
    assert (out / "report.html").stat().st_size > 10_000
    assert len(list(out.glob("*.png"))) >= 9
