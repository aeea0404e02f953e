"""Forked readers (``read/forked.py``): a reader that dies is taken over by the calling process, or, where its work
wrote files, the load stops with one clear error. CI's test process once lost a seed reader to a native crash
("double free or corruption"): ``test_seed_logs_step_by_step`` failed with BrokenProcessPool."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.gen_seed_logs import write_seed_logs
from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.read.forked import map_forked
from otel_verl.analysis.read.seed import convert
from otel_verl.analysis.read.spool import files

PARENT = os.getpid()


def _square_or_die(x: int, die_at: int) -> int:
    """Dies as a native crash would (no exception, no cleanup) when a forked child is handed ``die_at``."""
    if x == die_at and os.getpid() != PARENT:
        os._exit(134)
    return x * x


def test_a_reader_that_dies_is_taken_over_in_order(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        got = list(map_forked(_square_or_die, 2, range(8), [5] * 8))
    assert got == [x * x for x in range(8)]
    assert "a forked reader died" in caplog.text
    with pytest.raises(Exception, match="terminated abruptly"):
        list(map_forked(_square_or_die, 2, range(8), [5] * 8, redo=False))


def _dying_chunk_reader(chunk: list[Path], *args: object) -> object:
    if os.getpid() != PARENT and any(p.name == "worker_1.jsonl" and p.parent.name == "step_2" for p in chunk):
        os._exit(134)
    return _READ(chunk, *args)


_READ = convert._convert


def test_seed_logs_read_whole_though_a_reader_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    logs = write_seed_logs(tmp_path / "logs", steps=3, workers=2, requests=4, seed=5)
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "1")
    alone = load_spans(logs, seed_lines=False)
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "2")
    monkeypatch.setattr(convert, "_convert", _dying_chunk_reader)
    with caplog.at_level(logging.WARNING):
        forked = load_spans(logs, seed_lines=False)
    assert "a forked reader died" in caplog.text
    pd.testing.assert_frame_equal(alone.reset_index(drop=True), forked.reset_index(drop=True))
    # converting into a spool cannot be redone (a dead reader's lines may be there in part): one clear error
    with pytest.raises(AnalysisInputError, match="a reader process died while writing"):
        convert.convert_dir(logs, "run", spool=tmp_path / "spool")


def _dying_file_reader(chunk: list[Path], skip: bool) -> object:
    if os.getpid() != PARENT and any("step_2" in p.parts for p in chunk):
        os._exit(134)
    return _READ_FILES(chunk, skip)


_READ_FILES = files._read_chunk


def test_a_spool_reads_whole_though_a_reader_died(
    planted_spool: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "1")
    alone = load_spans(planted_spool)
    monkeypatch.setattr(files, "_read_chunk", _dying_file_reader)
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "2")
    with caplog.at_level(logging.WARNING):
        forked = load_spans(planted_spool)
    assert "a forked reader died" in caplog.text
    pd.testing.assert_frame_equal(alone.reset_index(drop=True), forked.reset_index(drop=True))
