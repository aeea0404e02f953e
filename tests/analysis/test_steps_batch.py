"""The step-at-a-time reader (``iter_steps``, ``analyze --steps``) decodes OTLP/JSON lines with the batch decoder.

A spool's ``step_<n>/`` files and a collector archive's first pass (which spills parts by step) both go through
``read_files``; here every line must reach the batch decoder (the general one is never called on a clean
spool), every step's table must equal the one the general decoder gives, and a bad line, wherever a batch
holds it, must still be one error naming its ``file:line`` (exit 2 from the CLI), or one skipped line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
from typer.testing import CliRunner

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read import LoadStats
from otel_verl.analysis.read.otlp import batch as otlp_batch
from otel_verl.analysis.read.otlp.documents import SpanColumns
from otel_verl.analysis.read.step_stream import iter_steps
from otel_verl.cli import app


def _archive(spool: Path, dest: Path) -> Path:
    """The spool's lines as one collector file archive (lines of every step in one file, outside step dirs)."""
    lines = [line for p in sorted(spool.rglob("*.jsonl")) for line in p.read_bytes().splitlines() if line.strip()]
    dest.mkdir()
    (dest / "traces.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return dest


def _decoder_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts documents read by the general decoder and parts added by the batch decoder."""
    calls = {"general": 0, "batch": 0}
    add_document, add_part = SpanColumns.add_document, SpanColumns.add_part

    def general(self: SpanColumns, doc: Any) -> int:
        calls["general"] += 1
        return add_document(self, doc)

    def batch(self: SpanColumns, part: dict[str, Any]) -> None:
        calls["batch"] += 1
        add_part(self, part)

    monkeypatch.setattr(SpanColumns, "add_document", general)
    monkeypatch.setattr(SpanColumns, "add_part", batch)
    return calls


def _steps(source: Path, **options: Any) -> dict[tuple[int, ...], pd.DataFrame]:
    return {s.steps: s.spans for s in iter_steps(source, **options)}


@pytest.mark.parametrize("layout", ["spool", "archive"])
def test_every_step_is_read_in_batches_as_the_general_decoder_reads_it(
    planted_spool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    source = planted_spool if layout == "spool" else _archive(planted_spool, tmp_path / "archive")
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "1")  # readers in this process, so the counts are seen
    monkeypatch.setattr(otlp_batch, "BATCH_SPANS", 64)  # many batches, each across several lines
    calls = _decoder_calls(monkeypatch)
    monkeypatch.setattr(SpanColumns, "batch_decoder", False)
    general = _steps(source)
    assert calls["general"] and not calls["batch"]
    calls.update(general=0, batch=0)
    monkeypatch.setattr(SpanColumns, "batch_decoder", True)
    batch = _steps(source)
    assert calls["batch"] > len(batch) and calls["general"] == 0  # every line by the batch decoder
    assert list(batch) == list(general) == [(s,) for s in range(1, 9)]
    for steps, frame in general.items():
        pd.testing.assert_frame_equal(batch[steps], frame)


def _with_bad_line(planted_spool: Path, tmp_path: Path) -> tuple[Path, Path, int]:
    """A copy of the spool where one span deep in a step's file has a value the decoders reject.

    Returns (spool, the damaged file, its line number)."""
    spool = tmp_path / "spool"
    shutil.copytree(planted_spool, spool)
    path = sorted((spool / "run1" / "step_4").glob("*.jsonl"), key=lambda p: p.stat().st_size)[-1]
    lines = path.read_bytes().splitlines()
    lineno = len(lines) // 2 + 1
    doc = json.loads(lines[lineno - 1])
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["attributes"].append({"key": "verl.turn.index", "value": {"intValue": "two"}})
    lines[lineno - 1] = orjson.dumps(doc)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return spool, path, lineno


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_bad_line_in_a_step_names_its_file_and_line(
    planted_spool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: str
) -> None:
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", jobs)  # "2": the step is read ahead in a forked reader
    monkeypatch.setattr(otlp_batch, "BATCH_SPANS", 64)
    spool, path, lineno = _with_bad_line(planted_spool, tmp_path)
    assert lineno > 1  # the bad line is not the first of its batch
    with pytest.raises(AnalysisInputError, match=f"^{path}:{lineno}: .*--skip-bad-lines"):
        list(iter_steps(spool))
    stats = LoadStats()
    skipped = _steps(spool, skip_bad_lines=True, stats=stats)
    assert stats.bad_lines == 1 and stats.first_bad[0].startswith(f"{path}:{lineno}: ")
    whole = _steps(planted_spool)
    assert list(skipped) == list(whole)
    lost = len(json.loads(path.read_bytes().splitlines()[lineno - 1])["resourceSpans"][0]["scopeSpans"][0]["spans"])
    assert len(skipped[(4,)]) == len(whole[(4,)]) - lost  # that line only
    for steps in whole:
        if steps != (4,):
            pd.testing.assert_frame_equal(skipped[steps], whole[steps])


def test_a_bad_line_in_an_archive_names_its_file_and_line(planted_spool: Path, tmp_path: Path) -> None:
    archive = _archive(planted_spool, tmp_path / "archive")
    path = archive / "traces.jsonl"
    lines = path.read_bytes().splitlines()
    at = len(lines) // 2
    lines.insert(at, b'{"resourceSpans": [')
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(AnalysisInputError, match=f"^{path}:{at + 1}: not JSON"):
        list(iter_steps(archive))


def test_analyze_steps_with_a_bad_line_is_one_line_exit_2(planted_spool: Path, tmp_path: Path) -> None:
    spool, path, lineno = _with_bad_line(planted_spool, tmp_path)
    res = CliRunner().invoke(app, ["analyze", str(spool), "--out", str(tmp_path / "o"), "--steps", "3:5", "--no-html"])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.output.count("\n") == 1, res.output
    assert f"{path}:{lineno}: " in res.output
