"""The README's span tree against a real run of the default trainer (verl's V1 sync, the CPU demo): every span the
run wrote is in the tree, preprocessing under turns too, and the barrier said to outlive its worker span."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.ray  # each run starts Ray and verl: serial (tests/conftest.py)
README = Path(__file__).resolve().parents[2] / "README.md"
NAME = re.compile(r"(verl\.phase \w+|verl\.[a-z_.]+[a-z]|text_completion|execute_tool|llm_request)")


def _tree() -> list[tuple[int, str, str]]:
    """(column, span name, the line) of every name in the README's span tree block."""
    text = README.read_text().split("## The span tree", 1)[1]
    block = text.split("```", 2)[1]
    return [(m.start(), m.group(1), line) for line in block.splitlines() for m in NAME.finditer(line)]


def _subtree(tree: list[tuple[int, str, str]], name: str) -> set[str]:
    """The names drawn below ``name``'s line and further right, up to the next name at its column or left of it."""
    start = next(i for i, (_, n, _) in enumerate(tree) if n == name)
    col, out = tree[start][0], set()
    for c, n, _ in tree[start + 1 :]:
        if c <= col:
            break
        out.add(n)
    return out


def test_every_span_of_a_v1_run_is_in_the_tree(demo_v1) -> None:
    spans: pd.DataFrame = demo_v1
    drawn = {n for _, n, _ in _tree()}
    names = {re.sub(r"^(text_completion|execute_tool) .*", r"\1", str(n)) for n in spans["name"].unique()}
    names = {n for n in names if not n.startswith("verl.phase ")}  # the tree draws gen and update_weights
    assert names <= drawn | {"verl.reward.compute"}, sorted(names - drawn)


def test_preprocess_is_drawn_under_turns_too(demo_v1) -> None:
    """Each later turn tokenises what came back (a tool's answer): most verl.preprocess spans are a turn's child."""
    spans: pd.DataFrame = demo_v1
    name_of = dict(zip(spans["span_id"], spans["name"].astype(str), strict=True))
    parents = spans.loc[spans["name"] == "verl.preprocess", "parent_id"].map(name_of)
    assert (parents == "verl.rollout.turn").any() and (parents == "verl.rollout.request").any()
    assert "verl.preprocess" in _subtree(_tree(), "verl.rollout.turn")
    assert "verl.preprocess" in _subtree(_tree(), "verl.rollout.request")


def test_the_barrier_is_said_to_outlive_its_worker_span(demo_v1) -> None:
    """A V1 barrier starts as its worker span ends and runs to the end of gen: past its parent."""
    spans = demo_v1.set_index("span_id")
    barriers = spans[spans["name"] == "verl.barrier"]
    parent_end = spans.loc[barriers["parent_id"], "end_ns"].to_numpy()
    assert (barriers["end_ns"].to_numpy() > parent_end).any()
    (line,) = [line for _, n, line in _tree() if n == "verl.barrier"]
    assert "worker span's end" in line


def test_every_root_of_a_v1_run_is_drawn_as_a_root(demo_v1) -> None:
    """Jaeger lists one trace per root span: beside the steps, validation and the sync before step 1 (verl's
    ``on_init_end``) are roots of their own, and a user told "a trace per step" took them for orphans (issue 51)."""
    spans: pd.DataFrame = demo_v1
    parented = spans["parent_id"].isin(set(spans["span_id"]))
    roots = set(spans.loc[~parented, "name"].astype(str))
    drawn_as_roots = {n for c, n, _ in _tree() if c == 0}
    assert {"verl.step", "verl.weight_sync"} <= roots, roots  # this run validates not: verl.validate is drawn too
    assert roots <= drawn_as_roots, sorted(roots - drawn_as_roots)
