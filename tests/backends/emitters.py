"""Traced workloads sent through the test collector: ``otel-verl demo`` (the real thing) and the plain-SDK
stand-in (tests/backends/standin_demo.py), and the OTLP/JSON lines readers that give back what they emitted.

One run per distinct (kind, args, env), shared by the whole session (conftest's ``emitter_runs``): the
pipeline tests and the Jaeger UI tests look at the same ``otel-verl demo`` traces instead of paying for a
second Ray start-up.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def otlp_spans(req: dict) -> Iterator[tuple[str | None, dict]]:
    """(service.name, span) for every span of one OTLP/JSON ``ExportTraceServiceRequest``-shaped document."""
    for rs in req.get("resourceSpans", []):
        svc = next(
            (
                a["value"].get("stringValue")
                for a in rs.get("resource", {}).get("attributes", [])
                if a["key"] == "service.name"
            ),
            None,
        )
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                yield svc, sp


def read_otlp_jsonl(paths: Iterable[Path | str]) -> dict[str, dict]:
    """span id → {trace, parent, name, service} from OTLP/JSON lines files (hex ids)."""
    spans = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if not line.strip():
                continue
            for svc, sp in otlp_spans(json.loads(line)):
                spans[sp["spanId"].lower()] = {
                    "trace": sp["traceId"].lower(),
                    "parent": (sp.get("parentSpanId") or "").lower(),
                    "name": sp["name"],
                    "service": svc,
                }
    return spans


def emitter_command(kind: str, spool: Path, args: Sequence[str] = ()) -> list[str]:
    """``standin``: the plain-SDK emitter; ``demo``: ``otel-verl demo`` (default ``--trainer legacy --steps 2``
    unless ``args``: the legacy rollout's barrier and over-sampling spans are what the pipeline tests count)."""
    if kind == "standin":
        return [sys.executable, str(HERE / "standin_demo.py"), "--steps", "2", "--spool", str(spool), *args]
    if importlib.util.find_spec("otel_verl.demo") is None:
        pytest.skip("otel-verl demo not available")
    exe = Path(sys.executable).with_name("otel-verl")
    cmd = [str(exe)] if exe.exists() else ["uv", "run", "otel-verl"]
    return [*cmd, "demo", *(args or ("--trainer", "legacy", "--steps", "2")), "--spool", str(spool)]


@dataclass(frozen=True)
class EmitterRun:
    kind: str
    spans: dict[str, dict]
    """The spool's spans: span id → {trace, parent, name, service}."""
    started: float
    """time.time() when the run started (a lower bound for search windows)."""
    spool: Path
    """Where it wrote its spool (the run's own folder under it)."""

    def traces(self) -> dict[str, dict[str, dict]]:
        """trace id → {span id → span} of this run."""
        out: dict[str, dict[str, dict]] = {}
        for sid, s in self.spans.items():
            out.setdefault(s["trace"], {})[sid] = s
        return out


def run_emitter(
    kind: str, otlp_grpc: str, spool: Path, args: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> EmitterRun:
    """Run one emitter against the collector's OTLP gRPC endpoint; its spool says what it sent."""
    cmd = emitter_command(kind, spool, args)
    full_env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_grpc,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_SDK_DISABLED": "false",
        **(env or {}),
    }
    started = time.time()
    r = subprocess.run(cmd, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{cmd} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    files = sorted(spool.rglob("*.jsonl"))
    assert files, f"{kind} wrote no spool under {spool}"
    for f in files:
        rel = f.relative_to(spool).parts
        # <run>/step_<n>/*.jsonl; spans without a verl.step attribute go to <run>/no_step/
        assert len(rel) == 3 and (rel[1].startswith("step_") or rel[1] == "no_step"), f"unexpected spool layout {rel}"
    spans = read_otlp_jsonl(files)
    assert spans, "spool is empty"
    return EmitterRun(kind, spans, started, spool)
