"""The public API states its contract (issue 52): ``analysis.load``, ``diagnose``, ``analyze`` and
``VerlInstrumentor`` say what each argument is, what comes back and what raises, and the arguments they document
are the ones they take (a renamed or added keyword fails here instead of leaving the docstring behind)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest

import otel_verl
from otel_verl import analysis

SECTION = re.compile(r"^\s{4}(Args|Keyword Args[^:]*|Returns|Raises):\s*$", re.MULTILINE)
NAME = re.compile(r"^\s{8}(\*{0,2}\w+):", re.MULTILINE)


def sections(doc: str) -> dict[str, str]:
    """Google-style sections of ``doc`` by heading (``Keyword Args (...)`` counts as ``Args``)."""
    found: dict[str, str] = {}
    marks = list(SECTION.finditer(doc))
    for mark, nxt in zip(marks, [*marks[1:], None], strict=True):
        heading = "Args" if mark.group(1).startswith(("Args", "Keyword Args")) else mark.group(1)
        found[heading] = doc[mark.end() : nxt.start() if nxt else len(doc)]
    return found


def documented(doc: str) -> set[str]:
    """The argument names ``doc``'s Args section lists (``**kw`` as ``kw``)."""
    return {name.lstrip("*") for name in NAME.findall(sections(doc).get("Args", ""))}


def docstring(obj: Any) -> str:
    """``obj``'s docstring, indented as written in a function body (``inspect.getdoc`` dedents it)."""
    return "\n".join("    " + line if line else line for line in (inspect.getdoc(obj) or "").splitlines())


@pytest.mark.parametrize("function", [analysis.load, analysis.diagnose, analysis.analyze], ids=lambda f: f.__name__)
def test_entry_points_document_every_argument(function: Callable[..., Any]) -> None:
    doc = docstring(function)
    assert {"Args", "Returns", "Raises"} <= set(sections(doc)), f"{function.__name__}: {sorted(sections(doc))}"
    assert documented(doc) == set(inspect.signature(function).parameters)


def test_instrumentor_documents_its_keywords() -> None:
    """The keywords ``_instrument`` reads (``kwargs.get("x")``), plus the base class's ``skip_dep_check``."""
    doc = docstring(otel_verl.VerlInstrumentor)
    assert {"Args", "Returns", "Raises"} <= set(sections(doc))
    read = set(re.findall(r"kwargs\.get\(\"(\w+)\"", inspect.getsource(otel_verl.VerlInstrumentor._instrument)))
    assert read and documented(doc) == read | {"skip_dep_check"}


def test_the_section_reader_sees_sections() -> None:
    doc = "    Args:\n        a: one.\n        **kw: more.\n\n    Returns:\n        x.\n"
    assert set(sections(doc)) == {"Args", "Returns"} and documented(doc) == {"a", "kw"}


def test_the_incremental_call_documents_every_argument() -> None:
    """``IncrementalDiagnosis.add``: the live account's one call into the analyzer (issue 52, must-have 1)."""
    add = analysis.IncrementalDiagnosis.add
    doc = docstring(add)
    assert {"Args", "Returns", "Raises"} <= set(sections(doc)), sorted(sections(doc))
    assert documented(doc) == set(inspect.signature(add).parameters) - {"self"}
