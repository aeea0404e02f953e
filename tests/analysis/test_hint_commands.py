"""The commands the CLI prints for the user to run do run, as printed, in the user's shell (issue 51).

``bash scripts/demo.sh`` runs the CLI through ``uv run``, whose PATH (its child's alone) starts with ``.venv/bin``;
the hints said ``otel-verl …`` and the user's shell answered "command not found". Here ``otel-verl analyze`` runs
from a shell without the venv on its PATH, through ``uv run`` as demo.sh does and by the venv's path, and the
command it prints (write the slow step for Perfetto) runs in that same shell.
"""

from __future__ import annotations

import html
import os
import re
import shutil
from pathlib import Path

import pytest

from otel_verl.invocation import otel_verl_command, script_command, user_path
from tests.clean_shell import ROOT, VENV_BIN, shell, user_env

OPEN_HINT = re.compile(r"open #1's steps in Perfetto: (.+?), then Open trace file", re.S)


def _printed_hint(stdout: str) -> str:
    found = OPEN_HINT.search(stdout)
    assert found, stdout[-3000:]
    return " ".join(found.group(1).split())  # the terminal may wrap it


@pytest.mark.parametrize("how", ["uv run --frozen otel-verl", "venv path"])
def test_printed_command_runs_in_the_users_shell(how: str, planted_spool: Path, tmp_path: Path) -> None:
    env = user_env()
    if how.startswith("uv") and not shutil.which("uv", path=env["PATH"]):
        pytest.skip("uv is not on the PATH")
    cli = how if how.startswith("uv") else str((VENV_BIN / "otel-verl").relative_to(ROOT))
    done = shell(f"{cli} analyze {planted_spool / 'run1'} --out {tmp_path / 'report'} --no-html", env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    hint = _printed_hint(done.stdout)
    assert hint.startswith(".venv/bin/otel-verl export-perfetto "), hint  # the checkout's venv, from its root
    written = ROOT / hint.rsplit("--out ", 1)[1]
    assert not written.exists(), f"{written} is in the way"
    try:
        ran = shell(hint, env)
        assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
        assert written.stat().st_size > 1000
    finally:
        written.unlink(missing_ok=True)
    # what failed before: the name alone is not a command in that shell
    assert shell("otel-verl --help", env).returncode == 127


def test_spelling_follows_the_users_path(tmp_path: Path) -> None:
    venv_bin = str(VENV_BIN)
    rest = os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"])
    in_venv = {"PATH": os.pathsep.join([venv_bin, rest])}
    activated = {"PATH": os.pathsep.join([venv_bin, rest]), "VIRTUAL_ENV": str(VENV_BIN.parent)}
    uv_run = {**activated, "UV_RUN_RECURSION_DEPTH": "1"}  # what `uv run` hands its child
    uv_run_activated = {**uv_run, "PATH": os.pathsep.join([venv_bin, venv_bin, rest])}
    assert otel_verl_command(in_venv) == otel_verl_command(activated) == "otel-verl"
    assert user_path(uv_run) == rest and user_path(uv_run_activated) == os.pathsep.join([venv_bin, rest])
    assert otel_verl_command(uv_run_activated) == "otel-verl"  # activated, then uv run: the shell has it
    script = VENV_BIN / "otel-verl"
    assert otel_verl_command(uv_run, cwd=VENV_BIN.parent.parent) == str(script.relative_to(VENV_BIN.parent.parent))
    assert otel_verl_command(uv_run, cwd=tmp_path) == str(script)  # not below the working directory: absolute
    assert otel_verl_command({"PATH": rest}, cwd=tmp_path) == str(script)
    # the venv's python links to the base interpreter (no mlflow there): that one on the PATH is not this one
    base = os.path.dirname(os.path.realpath(VENV_BIN / "python"))
    assert script_command("python", {"PATH": os.pathsep.join([base, rest])}, cwd=tmp_path) == str(VENV_BIN / "python")
    assert script_command("python", in_venv) == "python"


def test_demo_jaeger_lines_follow_the_ports_and_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from otel_verl.cli import jaeger_hint

    monkeypatch.setenv("OTEL_VERL_OTLP_GRPC_PORT", "5317")
    monkeypatch.setenv("JAEGER_QUERY_HTTP_PORT", "17686")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.setenv("JAEGER_UI_ASSETS_PATH", str(tmp_path / "ui"))
    lines = jaeger_hint.see_in_jaeger(Path("traces/run 1"), cwd=ROOT)
    assert lines[1].startswith("  bash scripts/jaeger.sh up ")
    assert lines[2] == f"  {otel_verl_command(cwd=ROOT)} replay 'traces/run 1' --endpoint http://127.0.0.1:5317"
    assert "open http://127.0.0.1:17686: Search, Service verl," in lines[3] and lines[3].endswith("jaeger.sh down")
    assert "Tags verl.step=2" in lines[3]  # every step's trace is named verl.step: how to find one (issue 51)
    # no web UI built (a Go-built Jaeger serves a placeholder at /): the line says how to get one
    monkeypatch.delenv("JAEGER_UI_ASSETS_PATH", raising=False)
    monkeypatch.setenv("OTEL_VERL_CACHE", str(tmp_path / "cache"))
    start, _, then = jaeger_hint.see_in_jaeger(Path("traces/run"), cwd=ROOT)[1:]
    # ...and sends nobody to Jaeger's placeholder page: the API answers (issue 51, item 7)
    assert "open" not in then and "curl 'http://127.0.0.1:17686/api/v3/services'" in then, then
    assert "web UI needs building once (docs/without-docker.md#the-jaeger-ui-without-docker)" in start, start
    assert (ROOT / "docs" / "without-docker.md").read_text().count("## The Jaeger UI without Docker") == 1
    (tmp_path / "cache" / "jaeger-ui").mkdir(parents=True)
    (tmp_path / "cache" / "jaeger-ui" / "index.html").write_text("<html></html>")
    assert "building" not in jaeger_hint.see_in_jaeger(Path("traces/run"), cwd=ROOT)[1]
    monkeypatch.setattr(jaeger_hint, "JAEGER_SCRIPT", tmp_path / "absent.sh")  # an installed wheel: no scripts/
    lines = jaeger_hint.see_in_jaeger(Path("traces/run"), cwd=ROOT)
    assert lines[1].startswith("  docker compose up -d ") and lines[3].endswith("docker compose down")


def test_the_trace_url_hint_points_at_the_jaeger_the_demo_lines_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51: the summary's and report's ``--trace-url 'http://JAEGER-HOST:16686/…'`` named a host no shell
    resolves; it is now the Jaeger that the demo's lines start (``scripts/jaeger.sh up`` or compose), as printed."""
    from otel_verl.analysis.report import presenting
    from otel_verl.cli import jaeger_hint

    monkeypatch.delenv("JAEGER_QUERY_HTTP_PORT", raising=False)
    monkeypatch.setenv("JAEGER_UI_ASSETS_PATH", "/a/built/jaeger-ui")
    opened = re.search(r"open (http://[\d.]+:\d+)", jaeger_hint.see_in_jaeger(Path("traces/run"), cwd=ROOT)[3])
    assert opened and opened.group(1) + "/trace/{trace_id}" == presenting.JAEGER_TRACE_URL


SUBCOMMAND = r"(demo|replay|analyze|import-legacy|export-legacy|export-perfetto|check-seams)\b"
SPELLED = re.compile(rf"(\S*otel-verl) {SUBCOMMAND}")
"""A command a text tells the user to type: the word that runs ``otel-verl``, then a subcommand."""


def _each_runs_in_the_users_shell(said: list[tuple[str, str]], where: str, env: dict[str, str]) -> None:
    assert said, f"no otel-verl command in {where}"
    cli = str((VENV_BIN / "otel-verl").relative_to(ROOT))
    for word, sub in sorted(set(said)):
        assert word == cli, f"{where} says `{word} {sub}`; the user's shell runs `{cli} {sub}`"
        ran = shell(f"{word} {sub} --help", env)
        assert ran.returncode == 0, f"{where}: `{word} {sub}`: {ran.stderr[-500:]}"


@pytest.mark.parametrize("args", ["--help", "analyze --help", "export-perfetto --help"])
def test_help_texts_examples_run_in_the_users_shell(args: str) -> None:
    """The help's examples (`Try it without a GPU: otel-verl demo`, `otel-verl analyze ./otel-verl-spool`,
    `otel-verl export-perfetto ./traces --steps 2 …`) said a name the user's shell did not find (issue 51.1)."""
    env = user_env(COLUMNS="400")  # one example a line: the help wraps at words, never inside a path
    cli = str((VENV_BIN / "otel-verl").relative_to(ROOT))
    done = shell(f"{cli} {args}", env)
    assert done.returncode == 0, done.stderr[-2000:]
    text = "\n".join(x for x in done.stdout.splitlines() if "Usage:" not in x)  # click's usage line: a synopsis
    _each_runs_in_the_users_shell(SPELLED.findall(text), f"`otel-verl {args}`", env)


def test_the_readmes_commands_run_in_the_users_shell() -> None:
    """The README's prose says `.venv/bin/otel-verl …` as it promises (the "In Jaeger" paragraph said
    `otel-verl replay ./traces …`: command not found, issue 51.1); the command table's rows are synopses."""
    text = (ROOT / "README.md").read_text()
    prose = "\n".join(x for x in text.splitlines() if not x.startswith("|"))
    spans = re.findall(r"`([^`\n]+)`", prose)
    said = [found.groups() for span in spans if (found := SPELLED.match(span))]
    assert ("replay" in {sub for _, sub in said}) and ("demo" in {sub for _, sub in said}), said
    _each_runs_in_the_users_shell(said, "README.md", user_env())


def test_the_trace_url_hint_is_the_whole_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51, item 11: "link every trace id to it with --trace-url '…'" named a flag and not the command that
    takes it; the summary (and report.html) now print the analyze command whole, which runs in the user's shell."""
    from rich.console import Console

    from otel_verl.analysis.report import page, presenting
    from otel_verl.cli.analyze import _print_traces

    monkeypatch.delenv("JAEGER_QUERY_HTTP_PORT", raising=False)
    console = Console(record=True, width=400)
    _print_traces(console, [{"steps": [2], "trace_ids": ["ab" * 16]}], None, "./traces")
    said = console.export_text().split("link every trace id to it: ", 1)[1].strip()
    cli = str((VENV_BIN / "otel-verl").relative_to(ROOT))
    assert said == f"{cli} analyze ./traces --trace-url '{presenting.JAEGER_TRACE_URL}'", said
    assert html.escape(presenting.trace_url_command("./traces")) in page._causes([], None, "./traces")
    ran = shell(f"{said} --help", user_env())
    assert ran.returncode == 0 and "--trace-url" in ran.stdout, ran.stderr[-500:]


@pytest.mark.parametrize("args", ["--help", "analyze --help", "export-perfetto --help"])
def test_help_examples_stay_whole_at_80_columns(args: str) -> None:
    """The second cold trial copied `.venv/bin/otel-verl` / `export-perfetto ./traces --steps 2 …` from two lines of
    the help at 80 columns (and the analyze help's Tempo example and --trace-url value): each example is a line of
    its own that fits, so the examples read at 80 columns are those read at 400, whole."""
    cli = str((VENV_BIN / "otel-verl").relative_to(ROOT))
    seen = {}
    for columns in ("80", "400"):
        done = shell(f"{cli} {args}", user_env(COLUMNS=columns))
        assert done.returncode == 0, done.stderr[-2000:]
        lines = [x.strip(" │") for x in done.stdout.splitlines() if "Usage:" not in x]
        seen[columns] = sorted(x[x.index(cli) :] for x in lines if SPELLED.search(x))
    assert seen["80"] == seen["400"] and seen["80"], seen
    if args == "analyze --help":
        assert any("--trace-url 'http://HOST:16686/trace/{trace_id}'" in x for x in lines), lines
