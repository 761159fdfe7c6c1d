"""Package boundaries (DESIGN.md, section 1): the packages built on torchrank.functional use its registry, its public
functions and its shared core (functional.core, functional.checks, functional.measures), never its private
modules, so the ranking engine can be restructured without touching them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import torchrank

ROOT = Path(torchrank.__file__).parent
# every package above the functional layer (DESIGN.md): trec_eval, compat, compare, metrics, losses, training, cli
OUTSIDE = sorted(
    path
    for path in ROOT.rglob("*.py*")  # type stubs (.pyi) too: what a type checker imports counts as well
    if path.suffix in (".py", ".pyi") and path.relative_to(ROOT).parts[0] not in ("functional",)
    and path.name != "__main__.py"
)


def private_imports(path: Path) -> list[str]:
    """The imports of ``path`` that reach a private module of torchrank.functional: ``torchrank.functional._x`` in
    ``import`` or ``from ... import``, or ``from torchrank.functional import _x``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [f"line {node.lineno}: {m}" for m in modules if m.startswith("torchrank.functional._")]
    return found


def test_the_scan_sees_every_form_of_private_import(tmp_path):
    source = tmp_path / "module.py"
    source.write_text(
        "import torchrank.functional._ranking\n"
        "from torchrank.functional._pipeline import prepare\n"
        "from torchrank.functional import _inputs, evaluate\n"
        "from torchrank.functional.core import gain_values\n"
        "from torchrank.functional import MEASURES\n"
    )
    assert private_imports(source) == [
        "line 1: torchrank.functional._ranking",
        "line 2: torchrank.functional._pipeline",
        "line 2: torchrank.functional._pipeline.prepare",
        "line 3: torchrank.functional._inputs",
    ]


def test_the_scanned_files_include_the_named_packages():
    names = {path.relative_to(ROOT).as_posix() for path in OUTSIDE}
    assert {"io/trec_eval.py", "compat/_retrieval.py", "compare.py", "metrics/_base.py", "metrics/classes.py"} <= names
    assert {"losses/_common.py", "losses/ndcg.py", "losses/err.py", "metrics/classes.pyi"} <= names


@pytest.mark.parametrize("path", OUTSIDE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_private_module_of_the_functional_is_imported_from_outside(path):
    assert private_imports(path) == [], (
        f"{path.relative_to(ROOT)} imports a private module of torchrank.functional; use the registry "
        "(torchrank.functional.MEASURES), a public function, torchrank.functional.core or torchrank.functional.checks"
    )
