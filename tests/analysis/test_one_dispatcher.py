"""One reader per source (issue 52): a source's format is told in one place, ``read.sources.source_format``, and
both readings, the whole run (``load_spans``) and a step at a time (``iter_steps``), go through it and read the same
spans. Before, ``load_spans`` and ``step_stream._open_source`` each told a source's format and each looked for the
seed's log folder."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.gen_seed_logs import write_seed_logs
from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read import LoadOptions, load_spans
from otel_verl.analysis.read.sources import source_format
from otel_verl.analysis.read.step_stream import iter_steps
from otel_verl.analysis.write.seed_to_spool import import_legacy

PACKAGE = Path(__file__).resolve().parents[2] / "otel_verl"
STEP_READERS = ("FileSteps", "SeedSteps", "RemoteSteps")


@pytest.fixture(scope="module")
def seed_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_seed_logs(tmp_path_factory.mktemp("seed") / "logs", steps=3, workers=2, requests=4, seed=5)


def test_each_format_is_told_once(seed_logs: Path, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    import_legacy(seed_logs, spool)
    auto = LoadOptions()
    assert source_format(str(seed_logs), auto) == "seed"
    assert source_format(str(seed_logs), LoadOptions(source_type="spool")) == "seed"  # a folder's own format wins
    assert source_format(str(spool), auto) == "spool"
    one = next(spool.rglob("*.jsonl"))
    assert source_format(str(one), auto) == "file"
    with pytest.raises(AnalysisInputError, match="nowhere: no such file or directory"):
        source_format(str(tmp_path / "nowhere"), auto)


def test_whole_and_step_readings_read_the_same_spans(seed_logs: Path) -> None:
    whole = load_spans(seed_logs)
    by_step = pd.concat([part.spans for part in iter_steps(seed_logs)], ignore_index=True)
    assert len(whole) > 0
    assert sorted(whole["span_id"]) == sorted(by_step["span_id"])


def _calls(name: str) -> dict[str, int]:
    """Modules of the package that call or construct ``name`` (by its bare or attribute name), with the count."""
    found: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if called == name:
                    rel = path.relative_to(PACKAGE).as_posix()
                    found[rel] = found.get(rel, 0) + 1
    return found


def test_one_dispatcher_picks_every_reader() -> None:
    """The seed-folder check and every step reader are reached from the dispatcher alone."""
    assert _calls("looks_like_seed_dir") == {"analysis/read/sources.py": 1}
    for reader in STEP_READERS:
        assert _calls(reader) == {"analysis/read/sources.py": 1}, reader
