"""Run torchmetrics' own retrieval test suite against ``torchrank.compat``.

Given a torchmetrics source tree (a checkout or ``git archive`` of the installed version's tag: its ``tests``
folder is enough), this runs ``tests/unittests/retrieval`` with every ``torchmetrics.retrieval`` class that
``torchrank.compat`` provides replaced by compat's, before the test modules import them. Only the classes are
swapped: torchmetrics' functional references (``torchmetrics.functional.retrieval``), its helpers and scikit-learn
stay as they are. Nothing is fetched at run time.

Usage (from the repository root)::

    git --git-dir=<torchmetrics.git> archive v1.9.0 tests | tar -x -C /tmp/tm
    python -m benchmarks.torchmetrics_suite /tmp/tm                 # compat's classes
    python -m benchmarks.torchmetrics_suite /tmp/tm --original      # torchmetrics' own classes (the baseline)
    python -m benchmarks.torchmetrics_suite /tmp/tm -- -k TestMAP -x   # more pytest arguments after --
    python -m benchmarks.torchmetrics_suite /tmp/tm -- unittests/retrieval/test_map.py   # one file

It prints pytest's summary line and exits with pytest's status. torchmetrics' test package imports ``cachier``
(a cache of reference values); where it is not installed an in-memory stand-in that caches nothing is used.
The DDP-marked cases run in one process unless ``USE_PYTEST_POOL=1`` is set, as in torchmetrics' own CI without
a pool. Not collected by torchrank's test suite (``benchmarks/`` is outside ``testpaths``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# imported by pytest (-p) before any test module imports torchmetrics.retrieval's classes; processes a DDP pool
# spawns receive compat's classes pickled by reference (torchrank.compat.<name>)
_PLUGIN = '''
"""Swap torchmetrics.retrieval's classes for torchrank.compat's (written by benchmarks/torchmetrics_suite.py)."""
import importlib
import os

SWAPPED = []
if os.environ.get("TORCHRANK_SUITE_ORIGINAL") != "1":
    import torchmetrics.retrieval as retrieval

    import torchrank.compat as compat

    for name in compat.__all__:
        ours = getattr(compat, name)
        theirs = getattr(retrieval, name, None)
        if not isinstance(theirs, type):
            continue
        # the class where torchmetrics defines it (torchmetrics.retrieval.average_precision...) and its package
        for module in {retrieval.__name__, theirs.__module__}:
            setattr(importlib.import_module(module), name, ours)
        SWAPPED.append(name)


def pytest_report_header(config):
    if os.environ.get("TORCHRANK_SUITE_ORIGINAL") == "1":
        return "torchmetrics.retrieval: torchmetrics' own classes"
    return "torchmetrics.retrieval classes swapped for torchrank.compat's: " + ", ".join(SWAPPED)
'''


_CACHIER = '''
"""Stand-in for cachier (written by benchmarks/torchmetrics_suite.py): caches nothing."""


def cachier(*args, **kwargs):
    return lambda function: function
'''


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path, help="a torchmetrics source tree (holding tests/unittests/retrieval)")
    parser.add_argument("--original", action="store_true", help="run torchmetrics' own classes (no swap)")
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: len(argv) - len(extra) - bool(extra or "--" in argv)])
    tests = args.tree / "tests"
    if not (tests / "unittests" / "retrieval").is_dir():
        parser.error(f"{args.tree} has no tests/unittests/retrieval: give the root of a torchmetrics source tree")
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="torchrank_suite_") as plugin_dir:
        Path(plugin_dir, "_torchrank_compat_swap.py").write_text(_PLUGIN)
        if importlib.util.find_spec("cachier") is None:  # torchmetrics' test package caches references with it
            Path(plugin_dir, "cachier.py").write_text(_CACHIER)
        env = dict(os.environ)
        # the plugin, torchrank and torchmetrics' `unittests` package importable here and in spawned processes
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [plugin_dir, str(repo), str(tests), env.get("PYTHONPATH")]))
        env["TORCHRANK_SUITE_ORIGINAL"] = "1" if args.original else "0"
        command = [
            sys.executable, "-m", "pytest", "-p", "_torchrank_compat_swap", "-p", "no:cacheprovider",
            "-q", "-rf", "--no-header", "-o", "addopts=", "--rootdir", str(tests),
            *([] if any(a.startswith("unittests/") for a in extra) else ["unittests/retrieval"]), *extra,
        ]
        return subprocess.call(command, cwd=tests, env=env)


if __name__ == "__main__":
    sys.exit(main())
