"""What ``otel-verl demo`` prints (issue 41): a line per step and its own results on stdout, nothing from the
libraries it drives (TransferQueue's thread-count warnings, verl's engine registry and platform probe, Ray's
token notice, verl's prints), and still every error."""

from __future__ import annotations

import logging
import sys
import warnings

import pytest

from otel_verl.demo.quiet_logs import third_party_quiet

NOISE = ("target_num_threads", "engine is not available", "No supported accelerator", "Token authentication",
         "UserWarning", "LLMServerManager:", "validation metrics", "is_fx_tracing")  # fmt: skip


def test_quiet_keeps_errors(capsys: pytest.CaptureFixture[str]) -> None:
    tq = logging.getLogger("transfer_queue.utils.common")
    tq.setLevel(logging.WARNING)  # as TransferQueue's get_logger sets it at import, before the demo runs
    tq.addHandler(handler := logging.StreamHandler(sys.stderr))
    try:
        with third_party_quiet():
            print("LLMServerManager: ['sim-0']")  # verl's own print
            print("otel_verl | step 1: no problem", end="")  # the live account's line (two writes)
            print()
            warnings.warn("torchtitan engine is not available: ModuleNotFoundError", UserWarning, stacklevel=1)
            logging.getLogger("transfer_queue.utils.common").warning("target_num_threads 8 should not exceed")
            logging.getLogger("transfer_queue.utils.common").error("the controller died")
            logging.getLogger("verl.plugin.platform").warning("No supported accelerator detected")
        print("after")
        assert tq.level == logging.WARNING  # given back
    finally:
        tq.removeHandler(handler)
        tq.setLevel(logging.NOTSET)
    out, err = capsys.readouterr()
    assert out == "otel_verl | step 1: no problem\nafter\n"
    assert err == "the controller died\n"


@pytest.mark.ray
def test_demo_prints_its_steps_and_nothing_else(readme_demo) -> None:
    """The README's demo (tests/conftest.py runs it once for this file and tests/test_readme_demo.py), as a user
    reads it: everything on stdout; until the analyzer's report, its own header, a line per step, the live
    account's verdict per step, its totals and the spool, and no line from the libraries it drives."""
    done, _ = readme_demo
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "", done.stderr  # every line the user reads on one stream
    lines = done.stdout.splitlines()
    assert [line.strip().split(" done")[0] for line in lines if "done in" in line] == [f"step {i}/3" for i in (1, 2, 3)]
    traces = next(i for i, line in enumerate(lines) if line.startswith("traces: "))
    assert [line.split(":")[0] for line in lines if line.startswith("otel_verl | ")] == [
        f"otel_verl | step {i}" for i in (1, 2, 3)
    ]  # the live account's verdict, a line per step
    told = [
        line.strip().split(":")[0].split(" done")[0] for line in lines if "done in" in line or "otel_verl |" in line
    ]
    for i in (1, 2):  # a step's live line after its own "done", before the next step's (issue 51)
        assert told.index(f"step {i}/3") < told.index(f"otel_verl | step {i}") < told.index(f"step {i + 1}/3"), told
    assert not [line for line in lines if any(n in line for n in NOISE)], lines
    demo = lines[: traces + 1]  # what the demo itself prints, before the analyzer's report
    header = demo[: next(i for i, line in enumerate(demo) if "done in" in line)]
    assert header and header[0].startswith("running 3 traced steps"), demo
    assert "2 workers, 16 prompts × 4 rollouts = 64 requests a step, trainer v1-sync" in header[0], header
    rest = demo[len(header) :]
    ours = [x for x in rest if "done in" in x or x.startswith(("otel_verl | ", "traces: ")) or " steps in " in x]
    beats = [x for x in demo if x.startswith("  still ")]  # a pipe's heartbeat every 30 s (issue 51)
    assert ours == [x for x in rest if x not in beats], rest  # nothing else between the header and the spool
    assert all("verl's validation before training" in x for x in header[1:]), header  # what step 1 waits for
    # the count line whole (never folded at the terminal's width), its count named as what verl counts: messages,
    # in plain words (verl's num_turns is no turn count, and a newcomer cannot place the name, issue 51)
    count = [x for x in rest if " steps in " in x]
    assert len(count) == 1 and count[0].endswith("messages in all (prompts, answers, tool results)"), count
    assert "num_turns" not in done.stdout


def test_a_step_is_told_done_after_verls_log_of_it(capsys: pytest.CaptureFixture[str]) -> None:
    """V1's ``_compute_metrics`` runs before verl's ``Tracking.log``, the call that writes the live line of the step
    before: "step 2/3 done" came before step 1's line. The demo's line now follows the log call (real ``Tracking``)."""
    from types import SimpleNamespace

    from verl.utils.tracking import Tracking

    from otel_verl.demo.v1.trainer import DemoParts, _tell_steps_after_log

    parts = DemoParts(
        SimpleNamespace(on_step=lambda step, s: print(f"step {step}/3 done in {s:.1f} s")), None, type, None
    )
    tracking = Tracking("p", "e", default_backend="console")
    _tell_steps_after_log(tracking, parts)
    tracking.log({"val/score": 0.5}, step=0)  # validation before step 1: no step to tell
    parts.done = (1, 2.5)
    tracking.log({"timing_s/step": 2.5}, step=1)
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if "done in" in line] == ["step 1/3 done in 2.5 s"] and parts.done is None
    assert "timing_s/step" in out[-2] and out[-1] == "step 1/3 done in 2.5 s", out
