"""The demo's help says what the demo does (issue 51, items c and d): its decode rate is the one the analysis reports
as usual (the README demo's stall read "the usual 0.818 ms/token" while ``--help`` said 0.4 ms: the simulated
engine's shared capacity doubles it while a step's 64 rollouts decode together), and its plant options call a
prompt a prompt (they said "sample IDX")."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from otel_verl.cli import app
from tests.test_words import PROMPT_AS_SAMPLE


def _help(*command: str) -> str:
    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "2000"})
    assert res.exit_code == 0, res.output
    return " ".join(res.stdout.replace("│", " ").split())


def test_the_demos_decode_rate_is_the_one_its_analysis_calls_usual() -> None:
    from otel_verl.demo.options import DemoOptions
    from otel_verl.demo.sim_server import SimServerConfig

    opts, engine = DemoOptions(), SimServerConfig()
    fields = {f.name: f.default for f in dataclasses.fields(SimServerConfig)}
    assert fields["seconds_per_token"] == opts.seconds_per_token
    at_once = opts.prompts * opts.n / opts.replicas  # one step's rollouts on each replica, decoding together
    rate = opts.seconds_per_token * max(1.0, at_once / engine.capacity)
    text = _help("demo")
    assert at_once > engine.capacity and rate == 2 * opts.seconds_per_token  # 64 rollouts share 32 slots' speed
    alone = f"a request alone ({opts.seconds_per_token:g}: {opts.seconds_per_token * 1000:.1f} ms)"
    together = f"{opts.prompts * opts.n} rollouts decoding at once on a replica get about {rate * 1000:.1f} ms each"
    assert alone in text and together in text, text
    assert opts.replicas == 1, "the help's figure is for the default run's one replica"


def test_no_help_calls_a_prompt_a_sample() -> None:
    from otel_verl.demo.plants import READY_MADE

    for command in (("demo",), ("analyze",), ("export-perfetto",)):
        text = _help(*command)
        assert not PROMPT_AS_SAMPLE.search(text), (command, PROMPT_AS_SAMPLE.search(text))
    assert "prompt IDX" in _help("demo") and "named by prompt, request id and replica" in _help("export-perfetto")
    for name, (_plan, what) in READY_MADE.items():
        assert not PROMPT_AS_SAMPLE.search(what), (name, what)


def test_every_plant_in_help_is_listed_where_the_readme_points() -> None:
    """The README's command table named 6 ``--plant`` values where ``--help`` has 8 (slow-replica and growing-sync
    missing, issue 51): it names one and links the table of all, which must hold every name ``--help`` offers."""
    import re

    from otel_verl.demo.plants import names

    root = Path(__file__).resolve().parents[2]
    row = next(line for line in (root / "README.md").read_text().splitlines() if line.startswith("| `otel-verl demo`"))
    listed = re.findall(r"--plant ([a-z|\\-]+)`", row)
    link = re.search(r"\[(\d+) names\]\(docs/trainer-details\.md#planted-problems\)", row)
    assert link is not None and int(link.group(1)) == len(names()), row
    table = (root / "docs" / "trainer-details.md").read_text().split("## Planted problems", 1)[1]
    help_text = _help("demo")
    for name in names():
        assert f"`{name}`:" in table and name in help_text, name
    assert all(n in names() for group in listed for n in group.replace("\\", "").split("|")), listed


def test_help_examples_use_a_spool_that_exists_and_usage_lines_one_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """The top-level help's example read ``export-perfetto ./spool``, a folder nothing writes (the README demo writes
    ./traces, a traced run ./otel-verl-spool), and usage lines said ``{SOURCE}`` beside ``{spool}`` (issue 51)."""
    import re

    from otel_verl.config import OtelVerlConfig

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    demo_spool = re.search(r"runs `(?:\.venv/bin/)?otel-verl demo [^`]*--spool (\S+)", readme)  # scripts/demo.sh
    assert demo_spool is not None
    monkeypatch.delenv("OTEL_VERL_SPOOL_DIR", raising=False)
    written = {demo_spool.group(1).rstrip("/"), f"./{OtelVerlConfig().spool_dir}"}  # what a traced run writes
    commands = ("analyze", "replay", "import-legacy", "export-legacy", "export-perfetto", "check-seams", "demo")
    for text in (_help(), *(_help(c) for c in commands)):
        for path in re.findall(r"otel-verl [a-z-]+ (\./[^\s`]+)", text):
            assert path.rstrip("/") in written, (path, written)
    for command in commands:
        usage = re.search(r"Usage: otel-verl \S+ \[OPTIONS\]((?: [{\[][\w-]+[}\]])*)", _help(command))
        assert usage is not None, command
        for metavar in re.findall(r"[\w-]+", usage.group(1)):
            assert metavar == metavar.upper(), (command, usage.group(0))


def test_what_the_demo_and_its_hints_write_in_the_repo_is_ignored() -> None:
    """The suggested ``--out step2.pftrace`` and verl's ``tensorboard_log/`` (the demo's ``--logger tensorboard``)
    landed in the repository root as untracked files (issue 51); so would the demo's spool, report and mlflow store."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    paths = ["step2.pftrace", "tensorboard_log/x", "traces/x", "otel-verl-spool/x", "otel-verl-report/x"]
    paths.append("otel-verl-mlruns/x")
    ignored = subprocess.run(["git", "check-ignore", *paths], cwd=root, capture_output=True, text=True)
    assert sorted(ignored.stdout.split()) == sorted(paths), ignored.stdout
