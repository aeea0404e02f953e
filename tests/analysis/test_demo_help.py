"""The demo's help says what the demo does (issue 51, items c and d): its decode rate is the one the analysis reports
as usual (the README demo's stall read "the usual 0.818 ms/token" while ``--help`` said 0.4 ms: the simulated
engine's shared capacity doubles it while a step's 64 rollouts decode together), and its plant options call a
prompt a prompt (they said "sample IDX")."""

from __future__ import annotations

import dataclasses

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
    assert f"(about {rate * 1000:.1f} ms at {opts.prompts * opts.n} rollouts a replica)" in text, text
    assert opts.replicas == 1, "the help's figure is for the default run's one replica"


def test_no_help_calls_a_prompt_a_sample() -> None:
    from otel_verl.demo.plants import READY_MADE

    for command in (("demo",), ("analyze",), ("export-perfetto",)):
        text = _help(*command)
        assert not PROMPT_AS_SAMPLE.search(text), (command, PROMPT_AS_SAMPLE.search(text))
    assert "prompt IDX" in _help("demo") and "named by prompt, request id and replica" in _help("export-perfetto")
    for name, (_plan, what) in READY_MADE.items():
        assert not PROMPT_AS_SAMPLE.search(what), (name, what)
