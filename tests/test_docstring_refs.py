"""Every Sphinx-style reference in otel_verl's docstrings and comments resolves (issue 52, "no rot").

A rename leaves ``:mod:`.parts``` pointing at nothing and no test notices; this one imports what each reference
names. A reference (``:mod:``, ``:func:``, ``:class:``, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:``, ``:obj:``,
in any string or comment) resolves, as Sphinx's Python domain would look it up:

* ``otel_verl.x.y``: absolute, by import of the longest module prefix and ``getattr`` for the rest;
* ``.x`` / ``..x``: relative to the module's package (one more dot per level up), else, as Sphinx searches a
  leading-dot target, any otel_verl module (for ``:mod:``) or defined name whose dotted name ends in ``.x``;
* ``name`` or ``Name.attr``: in the enclosing classes, then the module (its lazy ``__getattr__`` included), then
  the names it imports (``if TYPE_CHECKING`` too), then each package above it up to ``otel_verl``.

An attribute counts when the class declares it (a dataclass or NamedTuple field, an annotation, a slot).
"""

from __future__ import annotations

import ast
import functools
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.test_layout import imported_from

PACKAGE = Path(__file__).resolve().parents[1] / "otel_verl"
ROLE = re.compile(r":(mod|func|class|meth|attr|data|exc|obj):`~?([^`<]+?)(?:\(\))?`")
"""A role and its target (``~`` shortens the shown name only; a trailing ``()`` is decoration)."""
_MISSING = object()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def references(source: str) -> Iterator[tuple[int, str, str]]:
    """``(line, role, target)`` of each reference in ``source``'s strings and comments."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.STRING, tokenize.COMMENT):
            continue
        for match in ROLE.finditer(token.string):
            line = token.start[0] + token.string.count("\n", 0, match.start())
            yield line, match.group(1), match.group(2).strip()


def _import_aliases(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """Each name the module binds by import (anywhere, ``TYPE_CHECKING`` included) → the dotted name it stands for."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = imported_from(node, module, is_package)
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
    return aliases


def _classes_at(tree: ast.Module, line: int) -> list[str]:
    """The dotted names of the classes enclosing ``line``, innermost first."""
    found: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef) and child.lineno <= line <= (child.end_lineno or child.lineno):
                name = f"{prefix}{child.name}"
                found.insert(0, name)
                visit(child, name + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, prefix)

    visit(tree, "")
    return found


def _declares(cls: type, name: str) -> bool:
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}) or name in getattr(klass, "__slots__", ()):
            return True
        if name in getattr(klass, "__dataclass_fields__", {}) or name in getattr(klass, "_fields", ()):
            return True
    return False


def _module_file(name: str) -> Path | None:
    """The source file of otel_verl module ``name``, None when there is none."""
    base = PACKAGE.parent.joinpath(*name.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return base if base.is_dir() else None  # a namespace package (demo/v1)


def _statically_defined(path: Path, names: list[str]) -> bool:
    """Whether ``names`` (a top-level name, then members of a class) is defined in ``path``'s source: for a module
    that cannot be imported here (the vLLM engine needs vLLM)."""
    scope: list[ast.stmt] = ast.parse(path.read_text()).body
    for i, name in enumerate(names):
        found: ast.AST | None = None
        for node in scope:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                found = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    found = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".")[0]) == name for a in node.names
            ):
                found = node
        if found is None:
            return False
        if i + 1 < len(names):
            if not isinstance(found, ast.ClassDef):
                return True  # an attribute of an instance: not checked statically
            scope = found.body
    return True


def resolve(dotted: str) -> bool:
    """Whether ``dotted`` names a module or something in one (longest importable prefix, then attributes)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        ours = parts[0] == "otel_verl"
        path = _module_file(name) if ours else None
        if ours and path is None:
            continue
        try:
            obj: Any = importlib.import_module(name)
        except Exception:  # needs what is not installed here (the vLLM engine needs vLLM): read its source
            if path is None:
                continue
            return not parts[cut:] or (path.is_file() and _statically_defined(path, parts[cut:]))
        for attr in parts[cut:]:
            found = getattr(obj, attr, _MISSING)
            if found is _MISSING:
                if isinstance(obj, type) and _declares(obj, attr):
                    found = None  # a declared field: nothing further to look into
                else:
                    return False
            obj = found
        return True
    return False


def candidates(target: str, module: str, is_package: bool, classes: list[str], aliases: dict[str, str]) -> list[str]:
    """Where ``target``, written in ``module`` inside ``classes``, may live, in lookup order."""
    package = module if is_package else module.rpartition(".")[0]
    if target.startswith("."):
        rest = target.lstrip(".")
        base = package.split(".")
        base = base[: len(base) - (len(target) - len(rest) - 1)]
        return [".".join([*base, rest])]
    if target.split(".")[0] == "otel_verl":
        return [target]
    head, _, tail = target.partition(".")
    found = [f"{module}.{cls}.{target}" for cls in classes] + [f"{module}.{target}"]
    if head in aliases:
        found.append(f"{aliases[head]}.{tail}" if tail else aliases[head])
    parts = package.split(".")
    found += [f"{'.'.join(parts[:cut])}.{target}" for cut in range(len(parts), 0, -1)]
    found.append(target)
    return found


def _defined_names(body: list[ast.stmt], prefix: str) -> Iterator[str]:
    """The dotted names a module or class body defines (functions, classes and their members, assignments)."""
    for node in body:
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        for name in names:
            yield f"{prefix}.{name}"
        if isinstance(node, ast.ClassDef):
            yield from _defined_names(node.body, f"{prefix}.{node.name}")


@functools.cache
def defined_everywhere(modules_only: bool) -> frozenset[str]:
    """Every module of otel_verl and (unless ``modules_only``) every name its modules and classes define, fully
    qualified: where a leading-dot reference is searched when its own package does not hold it (Sphinx: any object
    of the role's kind whose name ends so)."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        names.add(module)
        if not modules_only:
            names.update(_defined_names(ast.parse(path.read_text()).body, module))
    return frozenset(names)


def found_by_suffix(role: str, target: str) -> bool:
    suffix = "." + target.lstrip(".")
    return any(name.endswith(suffix) for name in defined_everywhere(role == "mod"))


def stale_references() -> list[str]:
    """``file:line ref`` of each reference that resolves nowhere."""
    stale: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        module, is_package = _module_name(path), path.name == "__init__.py"
        tree = ast.parse(source, str(path))
        aliases = _import_aliases(tree, module, is_package)
        for line, role, target in references(source):
            options = candidates(target, module, is_package, _classes_at(tree, line), aliases)
            if not any(resolve(option) for option in options) and not (
                target.startswith(".") and found_by_suffix(role, target)
            ):
                stale.append(f"{path.relative_to(PACKAGE.parent).as_posix()}:{line} {target}")
    return stale


def test_every_docstring_reference_resolves() -> None:
    stale = stale_references()
    assert stale == [], f"{len(stale)} stale reference(s):\n" + "\n".join(stale)


def test_the_checker_catches_a_stale_reference() -> None:
    """The checker sees references (finds them, resolves good ones, rejects bad ones): a checker that resolved
    nothing, or everything, would pass every module."""
    source = '"""See :mod:`.gone` and :func:`~otel_verl.analysis.load`."""\n# :class:`Tables`\n'
    found = [(1, "mod", ".gone"), (1, "func", "otel_verl.analysis.load"), (2, "class", "Tables")]
    assert list(references(source)) == found
    assert resolve("otel_verl.analysis.load") and resolve("otel_verl.analysis.Tables")
    assert not resolve("otel_verl.analysis.figures.parts") and not resolve("otel_verl.analysis.no_such_name")
    relative = candidates(".parts", "otel_verl.analysis.figures.cdf", False, [], {})
    assert relative == ["otel_verl.analysis.figures.parts"]
    assert candidates("..read", "otel_verl.analysis.figures", True, [], {}) == ["otel_verl.analysis.read"]
    assert found_by_suffix("func", ".step_statistics.replica_keys")
    assert not found_by_suffix("mod", ".parts")  # classes have a ``parts`` field; no module is named so
