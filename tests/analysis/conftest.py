"""Fixtures: planted and clean synthetic runs written as spools, loaded once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from builder import PLANTED, Plan, build_run

from otel_verl.analysis.load import load_spans


@pytest.fixture(scope="session")
def planted_spool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("planted")
    build_run(PLANTED).write(root)
    return root


@pytest.fixture(scope="session")
def clean_spool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("clean")
    build_run(Plan(seed=7)).write(root)
    return root


@pytest.fixture(scope="session")
def planted_spans(planted_spool: Path):
    return load_spans(planted_spool)


@pytest.fixture(scope="session")
def clean_spans(clean_spool: Path):
    return load_spans(clean_spool)
