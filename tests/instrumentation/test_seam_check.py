"""``otel-verl check-seams``: which seams fit the installed verl (the newest release, 0.9.1), or a source tree."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from otel_verl.cli import app
from otel_verl.instrumentation.seam_check import ABSENT, FITS, MISFIT, check_all, check_seam
from otel_verl.wrapping.registry import alternatives, coroutine_wrapper
from otel_verl.wrapping.signatures import Expected, expect

runner = CliRunner()


def test_every_seam_fits_the_installed_verl() -> None:
    """The installed verl is the newest release on PyPI: every seam fits, or is skipped because its engine
    (vLLM, SGLang) is not installed here, or because this verl names it the other way."""
    fits = check_all()
    assert not [f for f in fits if f.status == MISFIT], [f for f in fits if f.status == MISFIT]
    verl_seams = [f for f in fits if f.module.startswith("verl.") and "_rollout." not in f.module]
    assert verl_seams and all(f.status in (FITS, ABSENT) for f in verl_seams)
    renamed = [f for f in verl_seams if f.status == ABSENT]
    assert [f.method for f in renamed] == ["AgentLoopBase.ct_merge_non_assistant_msg"]  # verl main's name
    assert "ct_merge_context_msg is wrapped instead" in renamed[0].why


@pytest.fixture
def fake_module(monkeypatch: pytest.MonkeyPatch) -> str:
    """A module whose seams drifted the ways verl's do: a renamed parameter, a coroutine turned plain, a
    method renamed (with a declared alternative), a method gone."""
    name = "otel_verl_test_fake_verl"
    module = types.ModuleType(name)

    class Manager:
        def generate_sequences(self, batch):  # was ``prompts``
            return batch

        def dispatch(self):  # was a coroutine
            return None

        def merge_new_name(self):
            return None

    module.Manager = Manager
    monkeypatch.setitem(sys.modules, name, module)
    expect({(name, "Manager.generate_sequences"): Expected(("prompts",), "barrier spans")})
    alternatives({(name, "Manager.merge_old_name"): "Manager.merge_new_name"})
    return name


def _plain(wrapped, instance, args, kwargs):
    return wrapped(*args, **kwargs)


@coroutine_wrapper
def _coroutine(wrapped, instance, args, kwargs):
    return wrapped(*args, **kwargs)


def test_each_kind_of_drift_is_named(fake_module: str) -> None:
    drifted = check_seam(fake_module, "Manager.generate_sequences", lambda: _plain, "barrier spans")
    assert drifted.status == MISFIT and "missing parameter 'prompts'" in drifted.why
    assert drifted.records == "barrier spans"
    kind = check_seam(fake_module, "Manager.dispatch", lambda: _coroutine, "worker spans")
    assert kind.status == MISFIT and kind.why == "no longer a coroutine function"
    renamed = check_seam(fake_module, "Manager.merge_old_name", lambda: _plain, "preprocess spans")
    assert renamed.status == ABSENT and "Manager.merge_new_name is wrapped instead" in renamed.why
    gone = check_seam(fake_module, "Manager.removed", lambda: _plain, "tool spans")
    assert gone.status == MISFIT and gone.why.startswith("not found")
    assert check_seam("no_such_engine_pkg.mod", "A.b", lambda: _plain, "x").status == ABSENT


def test_cli_against_a_source_tree(tmp_path: Path) -> None:
    """``--verl-source``: the tree is imported in a child process (its verl, not the installed one); a tree
    that lacks verl's modules has every verl seam misfit, exit 1."""
    (tmp_path / "verl").mkdir()
    (tmp_path / "verl" / "__init__.py").write_text('__version__ = "9.9.9"\n')
    res = runner.invoke(app, ["check-seams", "--verl-source", str(tmp_path)])
    assert res.exit_code == 1, res.output
    out = " ".join(res.output.split())
    assert "verl 9.9.9" in out and str(tmp_path) in res.output.replace("\n", "")
    assert "misfit" in out and "import failed" in out


def test_cli_refuses_a_directory_without_verl(tmp_path: Path) -> None:
    res = runner.invoke(app, ["check-seams", "--verl-source", str(tmp_path)])
    assert res.exit_code == 2 and "no verl/__init__.py" in " ".join(res.output.split())


def test_cli_says_whether_the_live_accounts_seams_fit() -> None:
    """The live account's own seams (verl's ``Tracking``) are in the table, and the check says whether what the live
    account needs fits (all of it on the installed verl)."""
    from otel_verl.instrumentation.targets import LIVE_KINDS, TARGETS, Kind

    assert {t.method for t in TARGETS if t.kind == Kind.LOGGER} == {
        "Tracking.__init__",
        "Tracking.log",
        "Tracking.finish",
        "Tracking.__del__",
    }
    assert Kind.LOGGER in LIVE_KINDS
    result = runner.invoke(app, ["check-seams"])
    assert result.exit_code == 0
    needed = sum(1 for t in TARGETS if t.kind in LIVE_KINDS)
    assert f"{needed} of {needed} seams it needs fit" in " ".join(result.output.split())


def test_the_answer_comes_alone_on_stdout() -> None:
    """verl's imports warned ten lines (torchtitan, veomni, megatron... engines not installed) on stderr before the
    answer: the real script prints its answer on stdout and nothing else."""
    import subprocess

    exe = Path(sys.executable).with_name("otel-verl")
    done = subprocess.run([str(exe), "check-seams"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    assert "seams fit" in done.stdout and "warn" not in done.stdout.lower()
