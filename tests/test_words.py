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


def _told(kind: str, scope: str, statuses: list[str], **details: object) -> str:
    """The message otel_verl writes for a cause of ``kind`` over requests that ended with ``statuses``."""
    import pandas as pd

    from otel_verl.analysis.findings.causes.messages import describe
    from otel_verl.analysis.findings.common.record import Finding

    reqs = pd.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(len(statuses))],
            "span_id": [f"{i:016x}" for i in range(len(statuses))],
            "status": statuses,
        }
    )
    f = Finding(kind, "warning", "", step=2, worker=0, seconds=3.0, details={"scope": scope, **details})
    return describe(f, None, reqs)  # type: ignore[arg-type]  # no step-scope cause: the account is not read


def test_a_gap_has_one_name_everywhere() -> None:
    """A request's time that none of its spans covers was "gap" in the figures' legends and "time between a
    request's spans" in the causes' messages (issue 51): one name, with its meaning, in both, and the glossary's."""
    from otel_verl.analysis.findings.common import kinds as k
    from otel_verl.analysis.labels import readable

    label = readable(k.PART_GAP)
    assert label == "gap (time between a request's spans)", label
    said = _told(k.SLOW_GAP, k.SCOPE_REQUEST, ["completed"], value=2.5, usual=0.01)
    assert said.startswith(f"{label} took 2.5 s for request r0"), said
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    assert "| gap | time between a request's spans" in glossary


def test_how_requests_ended_is_said_of_one_or_of_all() -> None:
    """The words "all truncated" were said of ONE request (issue 51), in a word a newcomer cannot place: verl's
    ``truncated`` is an answer cut off at ``rollout.response_length``; said so, singular for one, "all" for a group."""
    from otel_verl.analysis.findings.common import kinds as k

    one = _told(k.SLOW_REWARD, k.SCOPE_REQUEST, ["truncated"], value=2.0, usual=0.1)
    assert "request r0 (worker 0, cut off at the response length limit)" in one, one
    four = _told(k.SLOW_REWARD, k.SCOPE_SAMPLE, ["truncated"] * 4, value=2.0, usual=0.1, sample_index=3)
    assert "all 4 rollouts of prompt 3 (worker 0, all cut off at the response length limit)" in four, four
    two = _told(k.SLOW_REWARD, k.SCOPE_REQUEST, ["aborted"] * 2, value=2.0, usual=0.1)
    assert "2 requests (worker 0, both aborted)" in two, two
    assert not [m for m in (one, four, two) if "truncated" in m]


def test_the_glossary_explains_the_words_the_demo_prints() -> None:
    """A cold new user read the demo's output and report.html (issue 51, item 8) and met words the glossary did not
    explain: "stall" (the demo's top cause), "excess" and "ok" (the steps table), "info" (the glossary said "note"
    where the CLI counts "1 info"), "peers" (the verdict), the live line, "prefill"/"decode" (ms/token), "turn
    index", the replica ``sim-0`` and the trainer mode ``v1-sync`` of the demo's first line. Each has a row."""
    from otel_verl.analysis.findings.common import kinds as k

    rows = {
        line.split("|")[1].strip(): line
        for line in (ROOT / "docs" / "glossary.md").read_text().splitlines()
        if line.startswith("| ")
    }
    wanted = {"stall", "excess", "peers", "live line", "prefill, decode", "turn index", "trainer mode", "gap"}
    assert wanted <= rows.keys(), sorted(wanted - rows.keys())
    assert all(f"`{s}`" in rows["severity"] for s in (*k.SEVERITIES, "ok")), rows["severity"]
    assert "sim-0" in rows["replica"] and "verl.sim-engine" in rows["replica"]
    assert "v1-sync" in rows["trainer mode"]


def test_a_workers_time_between_its_calls_is_told_in_plain_words(tmp_path: Path) -> None:
    """The report's event-share table called 3.7 % of the workers' time "in a request, no event span" (issue 51,
    item 22): span jargon a newcomer could not place. A built run's table says it in plain words, with a glossary
    row."""
    from otel_verl.analysis.figures.event_share import compute_event_share
    from otel_verl.analysis.labels import REQUEST_LABEL, readable
    from otel_verl.analysis.read import load_spans
    from tests.analysis.builder import TraceBuilder

    b = TraceBuilder()
    turn = b.one_turn((4.0, 3.9, 3.8, 3.5, 3.4))  # a request of 3.2 s, an engine call of 2 s in it
    b.span("text_completion qwen", 0.5, 2.5, turn, step=1, file="worker_0.jsonl")
    shown = {readable(e) for e in compute_event_share(load_spans(b.write(tmp_path)))["event"]}
    assert REQUEST_LABEL in shown and not [w for w in shown if "span" in w], shown
    glossary = (ROOT / "docs" / "glossary.md").read_text().splitlines()
    rows = {line.split("|")[1].strip() for line in glossary if line.startswith("| ")}
    assert REQUEST_LABEL in rows


def test_a_status_beside_a_cause_says_how_common_it_was_in_the_step(tmp_path: Path) -> None:
    """Beside the demo's stall, "all 4 rollouts of prompt 3 (worker 0, replica sim-0, all truncated)" read as if the
    stall had cut them, while 64 of the demo's 192 requests reach the response length limit in every run (issue 51,
    item 18). A built run, a third of its requests cut at the limit, the slow one among them: the cause says how
    many of the step's requests ended so."""
    from otel_verl.analysis.findings.common import kinds as k
    from otel_verl.analysis.findings.diagnose import diagnose_run
    from otel_verl.analysis.read import load_spans
    from otel_verl.analysis.tables import Tables
    from tests.analysis.builder import Plan, build_run

    b = build_run(Plan(steps=4, slow_turn=(3, 1, 2, 15.0)))
    for sp in b.spans:
        rid = sp.attrs.get("verl.request.id")
        if isinstance(rid, str) and (rid == "s3w1r2" or int(rid.rsplit("r", 1)[1]) % 3 == 0):
            sp.attrs["verl.request.status"] = "truncated"
    d = diagnose_run(Tables.build(load_spans(b.write(tmp_path))))
    steps = Tables.build(load_spans(tmp_path)).requests
    step3 = steps[steps["step"] == 3]
    cut = int((step3["request_status"] == "truncated").sum())
    (f,) = [f for f in d.findings if f.kind in k.CAUSES and f.steps == [3] and "s3w1r2" in f.message]
    told = f"cut off at the response length limit, as were {cut} of the step's {len(step3)} requests"
    assert told in f.message and 1 < cut < len(step3), f.message


def test_a_status_only_the_cause_had_is_said_to_be_the_only_one(tmp_path: Path) -> None:
    """A cause whose request alone ended so says it is the only one; held-out async runs read "as were 0 of the
    step's 16 requests" (the request was another step's: an asynchronous cause is told where the trainer waited)
    and "as were 1 of the step's 40 requests" of the request itself."""
    from otel_verl.analysis.findings.common import kinds as k
    from otel_verl.analysis.findings.diagnose import diagnose_run
    from otel_verl.analysis.read import load_spans
    from otel_verl.analysis.tables import Tables
    from tests.analysis.builder import Plan, build_run

    b = build_run(Plan(steps=4, slow_turn=(3, 1, 2, 15.0)))
    for sp in b.spans:
        if sp.attrs.get("verl.request.id") == "s3w1r2":
            sp.attrs["verl.request.status"] = "truncated"
    d = diagnose_run(Tables.build(load_spans(b.write(tmp_path))))
    (f,) = [f for f in d.findings if f.kind in k.CAUSES and f.steps == [3] and "s3w1r2" in f.message]
    assert "cut off at the response length limit, the only one of the step's" in f.message, f.message
    assert "as were" not in f.message, f.message
