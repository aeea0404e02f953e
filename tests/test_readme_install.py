"""The README's install line for a real run installs what it names (issue 51: every suggested command runs as
printed). It said ``pip install "otel-verl[verl]"``, a name no package index carries ("No matching distribution
found for otel-verl"); it now installs this repository, whose wheel is built here the way pip builds it (uv's
build frontend, offline: hatchling from uv's cache) and read for the project name and the extra the line asks for.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def install_line() -> str:
    """The ``pip install`` line of the README's "Trace a real run" bash block, without its comment."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Trace a real run.*?```bash\n(.*?)```", text, re.S)
    assert block, "the README has no 'Trace a real run' bash block"
    line = next(x for x in block.group(1).splitlines() if x.startswith("pip install"))
    return line.split("#", 1)[0].strip()


def test_the_readme_installs_this_repository_with_the_verl_extra(tmp_path: Path) -> None:
    target = install_line().removeprefix("pip install").strip().strip("\"'")
    path, extras = re.fullmatch(r"([^\[]+)\[([\w,-]+)\]", target).groups()  # type: ignore[union-attr]
    assert (ROOT / path).resolve() == ROOT, f"{target!r} is not this repository (a name on an index?)"
    if shutil.which("uv") is None:
        pytest.skip("uv not installed")
    subprocess.run(
        ["uv", "build", "--wheel", "--offline", "--out-dir", str(tmp_path)], cwd=ROOT, check=True, capture_output=True
    )
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "Name: otel-verl" in meta
    for extra in extras.split(","):
        assert f"Provides-Extra: {extra}" in meta and f"verl==0.9.1; extra == '{extra}'" in meta, meta[:2000]
