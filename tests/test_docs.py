"""The documentation runs and agrees with the code.

Every ```python block of README.md and docs/*.md runs here, each on its own, as a reader who copies it runs it.
A block that goes on from the one before says so in its first line, ``# continues the block above (...)``, and
runs in the namespace the blocks before it left. A top-level expression whose comment (on its line, or the comment
line right after it) starts with a value — ``# tensor([0.5000, 0.6667])``, ``# (tensor(0.7222), tensor(0.5556))``,
``# ≈ [0.4167, 0.5]``, ``# {'map': tensor(0.9267)}`` — must evaluate to that value to the printed precision
(``...`` in it matches anything); a comment that starts with words is prose and not checked.

A block that needs what the suite cannot give (a GPU, the network, minutes of training) is marked on the line
before its fence with ``<!-- skip-snippet: why -->``; such marks stay rare (``MAX_SKIPPED``).

A block marked ``<!-- module: name -->`` is saved as ``name.py`` in a temporary folder on ``sys.path`` and imported,
its names then given to the later blocks: its classes are importable by reference, so that a later block can run
them in spawned processes (a Lightning ``Trainer(devices=2, strategy="ddp_spawn")``), which unpickle them there.
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*skip-snippet:\s*(?P<why>\S.*?)\s*-->")
CONTINUES = re.compile(r"# continues the blocks? above\b")  # a block's first line: it needs the one before it
MODULE = re.compile(r"<!--\s*module:\s*(?P<name>[A-Za-z_]\w*)\s*-->")
MAX_SKIPPED = 2
TOLERANCE = 6e-5  # values are printed to 4 decimals


def _snippets(path: Path) -> list[tuple[int, str, str | None]]:
    """``(first line number, code, skip reason or None)`` of each ```python block of ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            end = next(j for j in range(start, len(lines)) if lines[j].strip() == "```")
            marker = SKIP.search(lines[i - 1]) if i > 0 else None
            out.append((start + 1, "\n".join(lines[start:end]) + "\n", marker["why"] if marker else None))
            i = end
        i += 1
    return out


# ------------------------------------------------------------------------------------------ expected values


NUMBER = re.compile(r"-?(\d+\.?\d*(e-?\d+)?|nan)(?![\w.])")


def _value(text: str) -> object:
    return eval(text, {"__builtins__": {}, "tensor": lambda x, **_: x, "nan": math.nan})


def _stated(text: str) -> str | None:
    """The value a comment starts with (a number, or up to the bracket that closes its first one), or None
    when the comment is prose (``# [queries, 2], one sort`` names no value: it does not evaluate)."""
    text = text.strip().lstrip("≈").strip()
    if text.startswith(("tensor(", "(", "[", "{")):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch in "([{"
            depth -= ch in ")]}"
            if depth == 0 and ch in ")]}":
                text = text[: i + 1]
                break
    else:
        number = NUMBER.match(text)
        if number is None:
            return None
        text = number.group()
    try:
        _value(text)
    except Exception:
        return None
    return text


def _plain(value: object) -> object:
    """Tensors to (nested lists of) floats, tuples to lists: what a printed value and a computed one share."""
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _agrees(got: object, want: object) -> bool:
    if want is Ellipsis:
        return True
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(_agrees(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(_agrees, got, want))
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(got, want, abs_tol=TOLERANCE) or (math.isnan(got) and math.isnan(want))
    return got == want


def _expected_values(code: str) -> dict[int, str]:
    """Line number (1-based, of the statement's last line) -> the value its comment states."""
    comments: dict[int, tuple[str, bool]] = {}  # line -> (text, whole line)
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.string[1:], tok.line.strip().startswith("#"))
    out = {}
    for stmt in ast.parse(code).body:
        if not isinstance(stmt, ast.Expr):
            continue
        text, whole_line = comments.get(stmt.end_lineno, ("", False))
        if whole_line or not text:  # no comment on the line: the comment line right after it
            text, whole_line = comments.get(stmt.end_lineno + 1, ("", False))
            text = text if whole_line else ""
        value = _stated(text)
        if value is not None:
            out[stmt.end_lineno] = value
    return out


def _run(path: Path, first_line: int, code: str, namespace: dict) -> int:
    """Run one block statement by statement; check stated values; return how many were checked."""
    where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{first_line}"
    expected = _expected_values(code)
    tree = ast.parse(code)
    checked = 0
    for stmt in tree.body:
        line = first_line + stmt.lineno - 1
        if isinstance(stmt, ast.Expr):
            got = eval(compile(ast.Expression(stmt.value), f"{where} (line {line})", "eval"), namespace)
            if stmt.end_lineno in expected:
                text = expected[stmt.end_lineno]
                want = _value(text)
                assert _agrees(_plain(got), _plain(want)), f"{path.name} line {line}: got {got!r}, documented {text}"
                checked += 1
        else:
            exec(compile(ast.Module([stmt], []), f"{where} (line {line})", "exec"), namespace)
    return checked


def _module_name(path: Path, first_line: int) -> str | None:
    """The name a block is imported as (``<!-- module: name -->`` on the line before its fence), or None."""
    lines = path.read_text(encoding="utf-8").splitlines()
    marker = MODULE.search(lines[first_line - 3]) if first_line >= 3 else None
    return marker["name"] if marker else None


def _import_block(name: str, code: str, folder: Path, monkeypatch: pytest.MonkeyPatch, namespace: dict) -> None:
    """Import a block as module ``name`` from ``folder`` (put on ``sys.path``, which spawned processes inherit)."""
    import importlib
    import sys

    (folder / f"{name}.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)  # not a stale copy
    module = importlib.import_module(name)
    monkeypatch.setitem(sys.modules, name, module)  # removed again after the test
    namespace.update({key: value for key, value in vars(module).items() if not key.startswith("__")})


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_python_snippets_run_and_agree(path, capsys, tmp_path, monkeypatch):
    namespace: dict = {}
    for first_line, code, skip in _snippets(path):
        if skip is not None:
            continue
        if not CONTINUES.match(code):  # a block of its own: nothing defined before it
            namespace = {"__name__": f"docs_{path.stem}"}
        module = _module_name(path, first_line)
        if module is not None:
            _import_block(module, code, tmp_path, monkeypatch, namespace)
        else:
            _run(path, first_line, code, namespace)
    capsys.readouterr()  # what the snippets print is not the test's output


def test_a_block_runs_alone_unless_it_says_it_continues(tmp_path, monkeypatch):
    """A block that uses a name of an earlier block fails unless it says that it continues that block."""
    page = tmp_path / "page.md"
    first = "```python\nx = 2\n```\n"
    page.write_text(first + "```python\nx + 1  # 3\n```\n", encoding="utf-8")
    with pytest.raises(NameError, match="'x'"):
        test_python_snippets_run_and_agree(page, _NoCapture(), tmp_path, monkeypatch)
    page.write_text(first + "```python\n# continues the block above (x)\nx + 1  # 3\n```\n", encoding="utf-8")
    test_python_snippets_run_and_agree(page, _NoCapture(), tmp_path, monkeypatch)


class _NoCapture:
    def readouterr(self) -> None:
        return None


def test_collector_sees_every_block_and_few_skips():
    every = {p: _snippets(p) for p in DOCS}
    fences = sum(p.read_text(encoding="utf-8").count("```python") for p in DOCS)
    assert sum(map(len, every.values())) == fences > 20
    stated = sum(len(_expected_values(code)) for snips in every.values() for _, code, why in snips if not why)
    assert stated >= 20  # the value check has not gone blind
    skipped = [(p.name, line, why) for p, snips in every.items() for line, _, why in snips if why]
    assert len(skipped) <= MAX_SKIPPED, skipped
    for p in DOCS:  # a skip or module mark must sit right before a ```python fence, or it marks nothing
        lines = p.read_text(encoding="utf-8").splitlines()
        for i, text in enumerate(lines):
            if SKIP.search(text) or MODULE.search(text):
                assert i + 1 < len(lines) and lines[i + 1].strip() == "```python", f"{p.name}:{i + 1}"


def test_stated_values_are_checked():
    """The checker reads the comment forms the docs use, and a wrong stated value fails."""
    code = (
        "x = [0.5, 0.25]\n"
        "tuple(x)  # (0.5000, 0.2500)\n"
        "x  # ≈ [0.5, 0.25]\n"
        "x[0]  # the first\n"
        "x  # [queries, 2]: prose\n"
        "{'a': x[1]}\n"
        "# {'a': 0.25}\n"
        "x[1]  # 0.25: the second\n"
        "tensor = lambda v: v\n"
        "tensor(x[0])  # tensor(0.5000), as stated\n"
    )
    assert sorted(_expected_values(code)) == [2, 3, 6, 8, 10]
    assert _run(ROOT / "README.md", 1, code, {}) == 5
    with pytest.raises(AssertionError, match="documented"):
        _run(ROOT / "README.md", 1, "0.3  # 0.2999\n", {})
    assert _run(ROOT / "README.md", 1, "0.3  # 0.30001\n", {}) == 1


def test_readme_test_command_is_the_ci_command():
    """`.ci/run` runs exactly the README's second Quick start command."""
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## Quick start") :]
    block = quick[quick.index("```bash") + len("```bash") : quick.index("```", quick.index("```bash") + 7)]
    commands = [line.strip() for line in block.strip().splitlines()]
    assert len(commands) == 2 and commands[1] == ci[-1]
    assert commands[0].endswith("python -m torchrank evaluate")


def test_measures_doc_lists_trec_eval_measures_as_the_code_has_them():
    """docs/measures.md's trec_eval section: what it says is computed is, what it says is not provided is refused."""
    from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN, read_trec
    from torchrank.io.trec_eval import evaluate_batch

    text = (ROOT / "docs" / "measures.md").read_text(encoding="utf-8")
    section = text[text.index("## trec_eval measures beyond") :]
    computed = section[section.index("trec_eval's other measures") : section.index("```python")]
    refused = section[section.index("Not provided") :].split("\n\n")[0]
    batch = read_trec(SAMPLE_QRELS, SAMPLE_RUN)
    names = re.findall(r"`([A-Za-z0-9_]+)`", computed)
    assert len(names) >= 14
    for name in names:
        if name not in ("score_run", "evaluate_batch", "read_trec"):
            evaluate_batch(batch, [name])  # raises on an unknown or unsupported measure
    refused_names = re.findall(r"`([A-Za-z0-9_]+)`", refused)
    assert len(refused_names) >= 5
    for name in refused_names:
        if name != "evaluate":
            with pytest.raises(ValueError, match="not supported"):
                evaluate_batch(batch, [name])


def test_readme_names_every_declared_function_and_class():
    """README's lists of measure functions and metric classes follow the registry, and name nothing else."""
    import torchrank.metrics
    import torchrank.metrics.classes
    from torchrank.functional import MEASURES

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    functions_par = readme[readme.index("Measures: `precision`") :].split("\n\n")[0]
    classes_par = readme[readme.index("A `torchmetrics.Metric` per measure") :].split("\n\n")[0]
    functions = {spec.function.__name__ for spec in MEASURES.values() if spec.function is not None}
    classes = {spec.metric for spec in MEASURES.values() if spec.metric}
    functions_par = functions_par.split("`torchrank.functional.MEASURES`")[0]
    listed_functions = set(re.findall(r"`([a-z_][a-z0-9_]*)`", functions_par))
    listed_classes = set(re.findall(r"`([A-Z][A-Za-z0-9]+)`", classes_par.split(")")[0]))
    assert listed_functions == functions
    assert classes <= listed_classes
    for name in listed_classes:
        assert hasattr(torchrank.metrics, name) or hasattr(torchrank.metrics.classes, name), name


def test_readme_lists_every_extra():
    """README's table of extras names each extra of pyproject.toml, and nothing else."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| extra | installs | needed by |") :].split("\n\n")[0]
    assert sorted(re.findall(r"^\| `([a-z]+)` \|", table, re.MULTILINE)) == sorted(extras)
