"""One real vLLM demo run shared by every test here: it costs minutes (the engine's launch), so it runs once.

``otel-verl demo --engine vllm`` in a subprocess, as a user runs it: verl's real ``vLLMHttpServer`` on vLLM's
CPU build (two replicas behind verl's load balancer), 1 step of 4 prompts × 2 rollouts on 2
AgentLoopWorkers, a validation pass before training,
over-sampling 0.25 (2 of the 8 requests aborted in flight through verl's abort path), the demo's
tool-forcing logits processor. Its spans go to the spool and, through the real otelcol-verl collector,
to Jaeger (tests/backends' ``backends`` fixture). Needs ``scripts/install_vllm.sh``'s environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.backends.conftest import Backends, backends  # noqa: F401  (the collector + Jaeger fixture)

DEMO_ARGS = [
    *("--trainer", "legacy"),  # the vLLM demo runs the legacy loop (the V1 trainers sync weights into the sim)
    *("--steps", "1", "--prompts", "4", "--n", "2", "--workers", "2", "--oversample", "0.5", "--replicas", "2"),
]


RAY_START_TIMEOUT = "The current node timed out during startup"
"""Ray gives its raylet a fixed 30 s to register (ray/_private/node.py); on shared, overloaded CI cores it
can miss that before anything of ours runs. Only that failure is retried."""
RAY_START_ATTEMPTS = 3


@dataclass
class EngineRun:
    spool_run: Path
    """The run's spool directory (``<spool>/<run id>``)."""
    run_id: str
    started: float
    wall_seconds: float
    launch_seconds: float | None
    output: str
    backends: Backends


def _launch_seconds(output: str) -> float | None:
    for line in output.splitlines():
        if "vLLM server(s) launched in" in line:
            return float(line.split("launched in", 1)[1].split("s", 1)[0])
    return None


def run_demo(work: Path, args: list[str], env: dict[str, str], *, timeout: int) -> tuple[Path, str]:
    """``otel-verl demo ARGS`` into ``work/spool`` (again when Ray's node timed out starting): (its run's spool
    folder, what it printed)."""
    otel_verl = Path(sys.executable).parent / "otel-verl"
    for _attempt in range(RAY_START_ATTEMPTS):
        done = subprocess.run(
            [str(otel_verl), "demo", *args, "--spool", str(work / "spool"), "--no-report"],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        output = done.stdout + done.stderr
        if done.returncode == 0 or RAY_START_TIMEOUT not in output:
            break
    assert done.returncode == 0, output[-4000:]
    (spool_run,) = (p for p in (work / "spool").iterdir() if p.is_dir())  # the demo names its run
    return spool_run, output


@pytest.fixture(scope="session")
def engine_run(backends: Backends, tmp_path_factory) -> EngineRun:  # noqa: F811
    pytest.importorskip("vllm", reason="needs vLLM (scripts/install_vllm.sh)")
    work = tmp_path_factory.mktemp("engine_run")
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": backends.collector_otlp_grpc,
        "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
    }
    started = time.time()
    spool_run, output = run_demo(work, ["--engine", "vllm", *DEMO_ARGS], env, timeout=1500)
    return EngineRun(
        spool_run=spool_run,
        run_id=spool_run.name,
        started=started,
        wall_seconds=time.time() - started,
        launch_seconds=_launch_seconds(output),
        output=output,
        backends=backends,
    )


@pytest.fixture(scope="session")
def engine_spans(engine_run: EngineRun):
    from otel_verl.analysis.read import load_spans

    return load_spans(engine_run.spool_run)
