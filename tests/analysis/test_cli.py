"""The CLI: analyze end to end, one-line errors with exit code 2."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from otel_verl.cli import app
from otel_verl.cli.help_format import HOOK

runner = CliRunner()


def test_analyze_cli(planted_spool: Path, tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["analyze", str(planted_spool), "--out", str(tmp_path), "--no-html", "--set", "warning_margin=4"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "findings.json").read_text())
    causes = doc["findings"]
    assert causes[0]["kind"] == "stall" and causes[0]["steps"] == [3] and causes[0]["seconds"] > 10
    assert "step 3: rollout took" in res.output and "worker 1 stalled" in res.output
    assert {"stall", "slow_reward", "long_response", "aborted_waste", "long_tail"} <= {f["kind"] for f in causes}
    assert [s["step"] for s in doc["steps"]] == doc["summary"]["steps"]
    assert doc["summary"]["thresholds"]["warning_margin"] == 4
    # the summary in words: severities counted, full trace ids, the command that opens the step elsewhere
    assert "{'" not in res.output and re.search(r"causes: \d+ critical", res.output)
    assert causes[0]["trace_ids"][0] in res.output
    assert f"otel-verl export-perfetto {planted_spool / 'run1'} --steps 3:3 --out step3.pftrace" in res.output
    assert "incomplete" not in res.output
    # the whole analysis's time, not the load's alone (1.2 s of ~40 s, issue 51)
    assert re.search(r"\d+ spans \(analyzed in [\d.]+ s, [\d.]+ s of it to load\)", res.output), res.output[:500]


def test_bad_line_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "run" / "step_1").mkdir(parents=True)
    (tmp_path / "run" / "step_1" / "worker_0.jsonl").write_text("garbage\n")
    res = runner.invoke(app, ["analyze", str(tmp_path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "worker_0.jsonl:1:" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["analyze", str(tmp_path), "--out", str(tmp_path / "o"), "--skip-bad-lines"])
    assert res.exit_code == 2 and "no spans found" in res.output


def test_bad_threshold_and_missing_source(tmp_path: Path) -> None:
    res = runner.invoke(app, ["analyze", str(tmp_path / "nope"), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "no such file" in res.output


# ------------------------------------------------------------------ output paths (one line, exit 2)
def _one_line_error(res, *needles: str, progress_lines: bool = False) -> str:
    """Exit 2, no traceback, exactly one line on stderr: ``error: ...`` containing every needle (the demo
    also reports its run on stderr before: ``progress_lines``)."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)
    lines = [x for x in res.stderr.splitlines() if x.strip() and (not progress_lines or x.startswith("error"))]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.mark.parametrize(
    "command, out_kind",
    [
        ("analyze", "file"),
        ("analyze", "proc"),
        ("export-legacy", "file"),
        ("export-legacy", "proc"),
        ("export-perfetto", "dir"),
        ("export-perfetto", "proc"),
    ],
)
def test_bad_output_paths(planted_spool: Path, tmp_path: Path, command: str, out_kind: str) -> None:
    target = {"file": tmp_path / "a-file", "dir": tmp_path / "a-dir", "proc": Path("/proc/no-such/x")}[out_kind]
    (tmp_path / "a-file").write_text("keep me")
    (tmp_path / "a-dir").mkdir()
    res = runner.invoke(app, [command, str(planted_spool), "--out", str(target)])
    _one_line_error(res, str(target))
    assert (tmp_path / "a-file").read_text() == "keep me"


def test_import_legacy_spool_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "logs" / "step_1").mkdir(parents=True)
    (tmp_path / "logs" / "step_1" / "worker_0.jsonl").write_text(
        '{"timestamp": "2025-08-11T12:00:01", "event": "barrier_wait_duration", "duration_sec": 1.0}\n'
    )
    (tmp_path / "f").write_text("")
    res = runner.invoke(app, ["import-legacy", str(tmp_path / "logs"), "--spool", str(tmp_path / "f")])
    _one_line_error(res, "--spool", str(tmp_path / "f"))


def test_demo_report_path_checked_before_the_run(tmp_path: Path, monkeypatch) -> None:
    import otel_verl.demo.runner as runner_mod

    def never(*_a, **_k):
        raise AssertionError("the demo must not start with an unusable --report")

    monkeypatch.setattr(runner_mod, "run_demo", never)
    (tmp_path / "r").write_text("")
    _one_line_error(runner.invoke(app, ["demo", "--report", str(tmp_path / "r")]), "--report", str(tmp_path / "r"))


def test_demo_analysis_failure_keeps_the_spool(planted_spool: Path, tmp_path: Path, monkeypatch) -> None:
    """The run succeeded, then its report dir became unusable: one line naming it, the spool is untouched."""
    import otel_verl.demo.runner as runner_mod

    report = tmp_path / "report"
    spool = planted_spool / "run1"
    before = sorted((p, p.stat().st_size) for p in spool.rglob("*"))

    def fake_run(opts):
        report.rmdir()  # prepared before the run; replaced by a file while it ran
        report.write_text("")
        return runner_mod.DemoResult("run1", str(spool), 1, 1, 0.1, [0.1], 1, [])

    monkeypatch.setattr(runner_mod, "run_demo", fake_run)
    res = runner.invoke(app, ["demo", "--report", str(report)])
    line = _one_line_error(res, str(report), str(spool), progress_lines=True)
    assert "kept" in line and f"otel-verl analyze {spool}" in line
    assert sorted((p, p.stat().st_size) for p in spool.rglob("*")) == before


# ------------------------------------------------------------------ help texts
def _commands():
    return typer.main.get_command(app).commands


def _help(name: str) -> str:
    res = runner.invoke(app, [name, "--help"], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
    assert res.exit_code == 0, res.output
    return res.output


def test_help_keeps_every_placeholder() -> None:
    """Markdown help drops `<n>` as an HTML tag unless it is in a code span: every <placeholder> written in a
    command's help or an option's help must be in its --help output."""
    for name, cmd in _commands().items():
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        wanted = set(re.findall(r"<[a-z_]+>", " ".join(texts)))
        out = _help(name)
        assert all(w in out for w in wanted), (name, [w for w in wanted if w not in out])
    assert "step_<n>/worker_<rank>.jsonl" in _help("import-legacy")
    assert "<run>" in _help("import-legacy")


@pytest.mark.parametrize("name", ["", *typer.main.get_command(app).commands])
def test_help_reads_whole_at_80_columns(name: str, monkeypatch) -> None:
    """At 80 columns nothing is cut with "…" (an option name, a default, a URL in the help), every option name
    shows whole, and no line is wider than the terminal."""
    import typer.rich_utils

    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", 80)  # read from TERMINAL_WIDTH once, at its import
    args = [name, "--help"] if name else ["--help"]
    res = runner.invoke(app, args, env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert res.exit_code == 0, res.output
    assert "…" not in res.output, [line for line in res.output.splitlines() if "…" in line]
    lines = [line for line in res.output.splitlines() if line.strip() != HOOK]  # a line to copy whole, unwrapped
    assert max(len(line) for line in lines) <= 80
    if name:
        for p in _commands()[name].params:
            for opt in getattr(p, "opts", []):
                shown = opt if p.param_type_name == "option" else opt.upper()  # an argument shows as its metavar
                assert shown in res.output or p.hidden, (name, opt)


def test_analyze_help_teaches() -> None:
    out = " ".join(_help("analyze").split())
    for example in ("analyze ./otel-verl-spool", "traces.jsonl", "http://jaeger:16686", "http://tempo:3200"):
        assert example in out
    assert "Exit codes" in out and "0 =" in out and "2 =" in out


def test_every_command_documents_its_options() -> None:
    for name, cmd in _commands().items():
        for p in cmd.params:
            if p.name in ("skip_bad_lines", "source_type", "service", "since", "until", "lookback"):
                assert p.help, (name, p.name)
    for name in ("analyze", "export-legacy", "export-perfetto"):
        opts = {o for p in _commands()[name].params for o in getattr(p, "opts", [])}
        assert {"--service", "--since", "--until", "--lookback", "--source-type", "--skip-bad-lines"} <= opts, name
    out = " ".join(_help("demo").split())
    assert "turn index TURN (0-based" in out


# ------------------------------------------------------------------ pointing at the right command
def test_seed_logs_given_to_analyze_are_read_directly(tmp_path: Path) -> None:
    """A seed log directory is analyzed as it is (no import-legacy first); a bad line in it is one line
    naming file:line, and --skip-bad-lines skips it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from gen_seed_logs import write_seed_logs

    logs = write_seed_logs(tmp_path / "logs", steps=2, workers=2, requests=4, seed=1)
    res = runner.invoke(app, ["analyze", str(logs), "--out", str(tmp_path / "o"), "--no-html"])
    assert res.exit_code == 0, res.output
    found = json.loads((tmp_path / "o" / "findings.json").read_text())
    assert found["summary"]["steps"] == [1, 2]
    first = sorted(logs.rglob("worker_*.jsonl"))[0]
    with first.open("a") as fh:
        fh.write('{"timestamp": "2025-08-11T12:00:01", "event": 5}\n')
    n = len(first.read_text().splitlines())
    line = _one_line_error(runner.invoke(app, ["analyze", str(logs), "--out", str(tmp_path / "o2")]))
    assert f"{first.name}:{n}" in line and "--skip-bad-lines" in line
    res = runner.invoke(app, ["analyze", str(logs), "--out", str(tmp_path / "o3"), "--skip-bad-lines"])
    assert res.exit_code == 0, res.output
    # skipped lines are said before the verdict, in the summary and in the report, never "No problems found" alone
    out = " ".join(res.output.split())
    assert "The input is incomplete" in out and "1 bad line was skipped (--skip-bad-lines)" in out
    verdict = json.loads((tmp_path / "o3" / "findings.json").read_text())["summary"]["verdict"]
    assert not verdict.startswith("No problems found") and "1 bad input line was skipped" in verdict
    assert out.index("The input is incomplete") < out.index(verdict.split(":")[0])
    html = (tmp_path / "o3" / "report.html").read_text()
    assert "The input is incomplete" in html and f"{first.name}:{n}" in html and "class='problems'" in html


def test_spool_given_to_import_legacy(planted_spool: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["import-legacy", str(planted_spool), "--spool", str(tmp_path / "s")])
    _one_line_error(res, ".jsonl:1:", "otel-verl analyze")


def test_import_legacy_truncated_line_names_the_option(tmp_path: Path) -> None:
    (tmp_path / "step_1").mkdir()
    (tmp_path / "step_1" / "worker_0.jsonl").write_text('{"timestamp": "2025-08-11T12:00:01", "event": "x"')
    res = runner.invoke(app, ["import-legacy", str(tmp_path), "--spool", str(tmp_path / "s")])
    _one_line_error(res, "worker_0.jsonl:1", "truncated", "--skip-bad-lines")


def test_exports_take_a_window(planted_spool: Path, planted_spans, tmp_path: Path) -> None:
    """export-perfetto with --since: whole steps from the cut on, the same as analyze would read."""
    step3 = planted_spans[(planted_spans["kind"] == "step") & (planted_spans["step"] == 3)].iloc[0]
    since = str((int(step3["start_ns"]) + 10**9) / 1e9)  # inside step 3
    res = runner.invoke(
        app, ["export-perfetto", str(planted_spool), "--out", str(tmp_path / "t.json"), "--since", since]
    )
    assert res.exit_code == 0, res.output
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    steps = {e["args"].get("verl.step") for e in events if e["ph"] == "X"}
    assert steps == set(range(3, 9))
    kept = planted_spans[planted_spans["step"] >= 3]
    assert sum(e["ph"] == "X" for e in events) == len(kept)
    res = runner.invoke(
        app, ["export-perfetto", str(planted_spool), "--out", str(tmp_path / "s.json"), "--steps", "4:5"]
    )
    assert res.exit_code == 0, res.output
    events = json.loads((tmp_path / "s.json").read_text())["traceEvents"]
    assert {e["args"].get("verl.step") for e in events if e["ph"] == "X"} == {4, 5}
    _one_line_error(runner.invoke(app, ["export-perfetto", str(planted_spool), "--out", str(tmp_path / "x.json"),
                                        "--steps", "5:x"]), "--steps")  # fmt: skip


def test_console_script_exits_fast_with_every_output_written(planted_spool: Path, tmp_path: Path) -> None:
    """The real ``otel-verl`` script (``cli:main``) leaves ``analyze`` with ``os._exit``: exit code 0, the summary
    on a piped stdout, every file complete; a failure still exits 2 with its one line."""
    import subprocess

    exe = Path(sys.executable).with_name("otel-verl")
    assert exe.exists(), "the console script is installed with the project"
    done = subprocess.run(
        [str(exe), "analyze", str(planted_spool), "--out", str(tmp_path / "out")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "causes:" in done.stdout and "findings.json" in done.stdout  # the last line printed came through
    json.loads((tmp_path / "out" / "findings.json").read_text())
    assert (tmp_path / "out" / "report.html").read_text().rstrip().endswith("</html>")
    failed = subprocess.run(
        [str(exe), "analyze", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o2")], capture_output=True, text=True
    )
    assert failed.returncode == 2 and "no such file or directory" in failed.stdout + failed.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--plant", "nope"], "--plant 'nope'"),
        (["--plant", "stall", "--stall", "3:20"], "--plant replaces"),
        (["--trainer", "v2"], "trainer 'v2'"),
        (["--engine", "vllm"], "runs with trainer 'legacy'"),
        (["--plant", "long-response", "--engine", "vllm", "--trainer", "legacy"], "needs --engine sim"),
        (["--oversample", "0.25"], "oversample runs with trainer 'legacy'"),
    ],
)
def test_demo_refuses_what_it_cannot_run(args: list[str], needle: str, monkeypatch) -> None:
    """Before any run: exit 2 and one message naming the option (the demo's trainer modes and plants)."""
    import otel_verl.demo.runner as runner_mod

    def never(*_a, **_k):
        raise AssertionError("the demo must not start")

    monkeypatch.setattr(runner_mod, "run_demo", never)
    res = runner.invoke(app, ["demo", *args])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert needle in " ".join(res.output.split()), res.output
