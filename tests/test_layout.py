"""The package's shape (issue 26): no import cycles, no module over 400 lines, figures never import findings.

The import graph is built with ``ast`` from the source (nothing is imported), counting every import of
an ``otel_verl`` module: at module level, inside functions and under ``if TYPE_CHECKING`` alike, since
each is a dependency a reader has to follow. ``from otel_verl.x import y`` is an edge to ``otel_verl.x.y``
when that is a module, else to ``otel_verl.x``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "otel_verl"
MAX_LINES = 400

OVERSIZED_ALLOWED: dict[str, str] = {}
"""Modules allowed past MAX_LINES for good, with the reason (none so far)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from … import`` in ``module`` (a package's ``__init__`` when ``is_package``) reads."""
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return base


def _imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The otel_verl modules ``path`` (module ``name``) imports."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = imported_from(node, name, is_package)
            targets = []
            for alias in node.names:
                child = f"{base}.{alias.name}"
                targets.append(child if child in modules else base)
        else:
            continue
        for target in targets:
            while target and target not in modules:  # ``import a.b.c`` of a name inside a module
                target = target.rpartition(".")[0]
            if target.startswith("otel_verl") and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, name, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _without_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Edges from a package's ``__init__`` to its own submodules (re-exports) and from a submodule to its
    parent package are package plumbing, not a dependency between two jobs: left out of the cycle check."""
    return {
        name: {t for t in targets if not t.startswith(name + ".") and not name.startswith(t + ".")}
        for name, targets in graph.items()
    }


def test_import_graph_finds_real_edges() -> None:
    """The checker itself sees imports (a graph without edges would pass every rule)."""
    graph = _graph()
    assert "otel_verl.recording.recorder" in graph["otel_verl.instrumentation.rollout.trajectory"]
    assert "otel_verl.recording.delivery" in graph["otel_verl.recording.recorder"]
    assert "otel_verl.recording.delivery" in graph["otel_verl.export.provider"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    cycles = _cycles(_without_packages(_graph()))
    assert cycles == [], f"import cycles: {cycles}"


def test_no_module_over_the_line_limit() -> None:
    over = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and rel not in OVERSIZED_ALLOWED:
            over[rel] = lines
    assert over == {}, f"modules over {MAX_LINES} lines: {over}"


def test_delivery_runs_one_way() -> None:
    """Recording hands spans to export through the interface export installs at setup
    (:mod:`otel_verl.recording.delivery`), never by importing it: processor → exporter, as in the SDK.
    Recording knows nothing above it either (instrumentation, analysis, the CLI)."""
    graph = _graph()
    above = ("otel_verl.export", "otel_verl.instrumentation", "otel_verl.analysis", "otel_verl.cli", "otel_verl.demo")
    bad = {
        name: sorted(t for t in targets if t.startswith(above))
        for name, targets in graph.items()
        if name.startswith("otel_verl.recording")
    }
    bad = {name: targets for name, targets in bad.items() if targets}
    assert bad == {}, f"recording importing the layers that use it: {bad}"


def test_figures_never_import_findings() -> None:
    """Figures show tables; the diagnosis layer (findings) is built on tables too, never under figures."""
    graph = _graph()
    bad = {
        name: sorted(
            t for t in targets if t == "otel_verl.analysis.findings" or t.startswith("otel_verl.analysis.findings.")
        )
        for name, targets in graph.items()
        if name.startswith("otel_verl.analysis.figures")
    }
    bad = {name: targets for name, targets in bad.items() if targets}
    assert bad == {}, f"figures importing findings: {bad}"


ANALYZER_STAGES: tuple[tuple[str, ...], ...] = (
    ("errors", "labels", "output_paths", "report.plotly_embed"),
    ("read",),
    ("tables",),
    ("findings.common",),
    ("findings.steps",),
    ("findings.account",),
    ("findings.causes",),
    ("findings.patterns", "findings.quality"),
    ("findings",),
    ("incremental",),
    ("report.presenting", "report.step_rows"),
    ("figures", "write"),
    ("stream",),
    ("report",),
    ("pipeline",),
)
"""The analyzer's stages in order (docs/internals.md draws them), under ``otel_verl.analysis``: a module imports only
its own stage and the ones before it. The seed's readers are part of ``read`` (``read.seed``). The report's room
(``report/``) holds modules of three stages: the packed plotly.js and the shared words sit low, for the figures and
the Perfetto writer use them; the page itself is built last."""


def _stage(module: str) -> int | None:
    """The index in :data:`ANALYZER_STAGES` of ``module``'s stage (the longest prefix that names it); None outside
    the analyzer or for its package (``otel_verl.analysis``, the door over them all)."""
    rest = module.removeprefix("otel_verl.analysis.")
    if rest == module:
        return None
    best: tuple[int, int] | None = None
    for i, names in enumerate(ANALYZER_STAGES):
        for name in names:
            if (rest == name or rest.startswith(name + ".")) and (best is None or len(name) > best[1]):
                best = (i, len(name))
    assert best is not None, f"{module} is in no stage of ANALYZER_STAGES"
    return best[0]


def test_the_analyzer_imports_only_down_its_stages() -> None:
    """read → tables → findings (common → steps → account → causes → patterns, quality → diagnose) → presenting →
    figures, writers → stream → report → pipeline: no import runs back up (the seed's readers once sat in a folder
    beside the writers, and read imported them from above)."""
    graph = _graph()
    up = {
        name: sorted(t for t in targets if (st := _stage(t)) is not None and st > stage)
        for name, targets in graph.items()
        if (stage := _stage(name)) is not None
    }
    up = {name: targets for name, targets in up.items() if targets}
    assert up == {}, f"imports running back up the analyzer's stages: {up}"
    assert _stage("otel_verl.analysis.findings.account.anomalies") == 5
    assert _stage("otel_verl.analysis.read.seed.rows") == 1


PACKAGE_STAGES: tuple[tuple[str, ...], ...] = (
    ("semconv", "config", "content", "version", "package", "invocation"),
    ("wrapping",),
    ("recording",),
    ("export",),
    ("instrumentation",),
    ("analysis",),
    ("live",),
    ("", "activate", "cli", "demo"),
)
"""The package's stages, lowest first (issue 52): the shared names; then the tracing side, wrap → record → export →
the verl seams that use all three; then the analyzer, the live account built on it, and the entry points (the package
itself, the Ray hook, the CLI, the demo). A module imports only its own stage and the ones before it: the tracing side
never leans on the analyzer or the live account; what it needs of them is handed in from above
(:mod:`otel_verl.live.plug` installs the live feed and the ``Tracking`` seams' work)."""


def _package_stage(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    found = [i for i, names in enumerate(PACKAGE_STAGES) if top in names]
    assert found, f"{module} is in no stage of PACKAGE_STAGES"
    return found[0]


def test_no_lower_stage_imports_a_higher_one() -> None:
    graph = _graph()
    up = {
        name: sorted(t for t in targets if _package_stage(t) > _package_stage(name)) for name, targets in graph.items()
    }
    up = {name: targets for name, targets in up.items() if targets}
    assert up == {}, f"imports running back up the package's stages: {up}"
    assert _package_stage("otel_verl.instrumentation.targets") < _package_stage("otel_verl.live.tracking")
    assert _package_stage("otel_verl.export.provider") < _package_stage("otel_verl.analysis.read")


def test_the_live_account_uses_the_analyzer_through_its_door() -> None:
    """The live account asks the analyzer through its public API only (``otel_verl.analysis``: the incremental
    call :class:`~otel_verl.analysis.IncrementalDiagnosis` and readers of findings.json's shapes), so a change
    inside the analyzer never reaches it."""
    graph = _graph()
    inside = {
        name: sorted(t for t in targets if t.startswith("otel_verl.analysis."))
        for name, targets in graph.items()
        if name.startswith("otel_verl.live")
    }
    inside = {name: targets for name, targets in inside.items() if targets}
    assert inside == {}, f"the live account reaching inside the analyzer: {inside}"
    assert "otel_verl.analysis" in graph["otel_verl.live.account"]
