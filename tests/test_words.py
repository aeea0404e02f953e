"""One word for each thing, everywhere a user reads (issue 51, item d): a cold new user met "sample 3" for a prompt
in the messages and the demo's plant options, while the README's tree called a prompt's rollouts its "samples".
otel_verl says *prompt* (``prompt 3``: ``verl.sample.index`` 3) and *rollout* (one of its ``rollout.n``
trajectories); docs/glossary.md says so, and nothing a user reads says "sample N" for a prompt."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPT_AS_SAMPLE = re.compile(
    r"\bsamples? (\d+|IDX|N)\b(?!\S* versions)|named by sample|\{sample[:}]|the sample's|sample IDX's"
    r"|rollout\.n samples|samples it serves",
    re.IGNORECASE,
)
"""A prompt called a sample: ``sample 3``, ``samples 0-7``, ``sample IDX``, ``{sample: s}``, ``its rollout.n
samples``, ``Sample IDX's``, ``the samples it serves`` (not verl's samples, the rollouts: ``samples 1-3 versions
old``)."""


def _hits(name: str, text: str) -> list[str]:
    return [
        f"{name}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1) if PROMPT_AS_SAMPLE.search(line)
    ]


def test_the_readme_and_docs_call_a_prompt_a_prompt() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    hits = [h for p in pages for h in _hits(p.relative_to(ROOT).as_posix(), p.read_text())]
    assert not hits, "\n".join(hits)
    tree = (ROOT / "README.md").read_text()
    assert "one prompt: its rollout.n rollouts" in tree


def test_the_glossary_defines_prompt_and_rollout() -> None:
    rows = {
        line.split("|")[1].strip(): line
        for line in (ROOT / "docs" / "glossary.md").read_text().splitlines()
        if line.startswith("| ")
    }
    assert "prompt, prompt N" in rows and "`verl.sample.index`" in rows["prompt, prompt N"]
    assert "rollout" in rows and "never *sample* for a prompt" in rows["rollout"]
    assert not any(word.startswith("sample,") for word in rows), rows.keys()


def test_a_cause_of_one_prompts_rollouts_names_the_prompt() -> None:
    """The message the README demo's stall is told with (findings/causes/messages.py, a prompt-group scope)."""
    from otel_verl.analysis.findings.causes import messages
    from otel_verl.analysis.findings.common import kinds as k

    source = Path(messages.__file__).read_text()
    assert "rollouts of prompt {d.get('sample_index')}" in source and k.SCOPE_SAMPLE in ("sample",)
    assert not _hits("messages.py", source)


def test_the_demos_help_and_plants_call_a_prompt_a_prompt() -> None:
    """``demo --help`` said "Sample IDX's first engine call stalls" and the slow-replica plant "the samples it
    serves" (issue 51), while the glossary says every option says *prompt*: the help text of every option and every
    plant's description (the ready-made ones and the growing ones) are read as a user sees them."""
    from typer.testing import CliRunner

    from otel_verl.cli import app
    from otel_verl.demo.plants import GROWING, READY_MADE

    res = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "2000"})
    assert res.exit_code == 0, res.output
    help_text = " ".join(res.stdout.replace("│", " ").split())
    assert "--stall" in help_text and "--plant" in help_text, help_text
    plants = {name: what for name, (_plan, what) in {**READY_MADE, **GROWING}.items()}
    assert {"slow-replica", "growing-sync"} <= plants.keys()
    hits = _hits("demo --help", help_text) + [h for n, w in plants.items() for h in _hits(f"--plant {n}", w)]
    assert not hits, "\n".join(hits)
