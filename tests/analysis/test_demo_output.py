"""What ``otel-verl demo`` prints (issue 41): a line per step and its own results on stdout, nothing from the
libraries it drives (TransferQueue's thread-count warnings, verl's engine registry and platform probe, Ray's
token notice, verl's prints), and still every error."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from otel_verl.demo.quiet import third_party_quiet

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
def test_demo_prints_its_steps_and_nothing_else(tmp_path) -> None:
    pytest.importorskip("verl")
    args = ["--steps", "2", "--workers", "1", "--prompts", "4", "--n", "2", "--no-val-before-train", "--no-report"]
    res = subprocess.run(
        [str(Path(sys.executable).parent / "otel-verl"), "demo", "--spool", str(tmp_path / "spool"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "OTEL_VERL_LIVE"},  # the live account on, as for a user
    )
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    assert res.stderr == "", res.stderr  # every line the user reads on one stream
    assert [line.strip().split(" done")[0] for line in lines if "done in" in line] == ["step 1/2", "step 2/2"]
    assert any(line.startswith("traces: ") for line in lines)
    assert [line.split(":")[0] for line in lines if line.startswith("otel_verl | ")] == [
        "otel_verl | step 1",
        "otel_verl | step 2",
    ]  # the live account's verdict, a line per step
    assert not [line for line in lines if any(n in line for n in NOISE)], lines
    assert len(lines) <= 10, lines
