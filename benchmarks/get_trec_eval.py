"""Fetch the trec_eval C binary (9.0.4) that Anserini ships, from PyPI, for the command-line benchmark.

Neither PyPI nor Debian packages trec_eval itself, but pyserini's wheel carries Anserini's jar, which carries
trec_eval's compiled binaries (via jtreceval) for Linux and macOS. Run from the repository root::

    python -m benchmarks.get_trec_eval            # -> benchmarks/tools/trec_eval (git-ignored)

It downloads one wheel with pip (``pyserini==0.39.0``, 171 MB, no dependencies, nothing installed), extracts the
binary for this platform, then checks it against trec_eval's own published per-query output
(``tests/data/trec_eval/out.test.aq``) for the measures the benchmark times; a mismatch is an error.
``python -m benchmarks.bench_cli`` then finds it there (or at ``$TREC_EVAL``, or as ``trec_eval`` on the PATH).
Nothing of it is committed: the binary is a third party's, fetched on request.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TARGET = REPO_ROOT / "benchmarks" / "tools" / "trec_eval"
WHEEL = "pyserini==0.39.0"
JAR = "pyserini/resources/jars/anserini-0.38.0-fatjar.jar"
BINARIES = {  # (system, machine) -> member of the jar
    ("Linux", "x86_64"): "trec_eval/trec_eval-linux-amd64",
    ("Linux", "i686"): "trec_eval/trec_eval-linux-i386",
    ("Darwin", "x86_64"): "trec_eval/trec_eval-macosx-x86_64",
    ("Darwin", "arm64"): "trec_eval/trec_eval-macosx-aarch64",
}
TREC_DATA = REPO_ROOT / "tests" / "data" / "trec_eval"


def find() -> Path | None:
    """The trec_eval binary: ``$TREC_EVAL``, else ``benchmarks/tools/trec_eval``, else ``trec_eval`` on the PATH."""
    for candidate in (os.environ.get("TREC_EVAL"), TARGET, shutil.which("trec_eval")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def version(binary: Path) -> str:
    """What ``binary -v`` says (trec_eval prints its version on stderr), e.g. ``trec_eval version 9.0.4``."""
    shown = subprocess.run([str(binary), "-v"], capture_output=True, text=True)
    return (shown.stdout + shown.stderr).strip()


def extract(wheel: Path, target: Path) -> None:
    """Write the trec_eval binary for this platform from pyserini's ``wheel`` to ``target`` (executable)."""
    member = BINARIES.get((platform.system(), platform.machine()))
    if member is None:
        raise SystemExit(f"No trec_eval binary in Anserini's jar for {platform.system()} {platform.machine()}.")
    with zipfile.ZipFile(wheel) as outer, zipfile.ZipFile(io.BytesIO(outer.read(JAR))) as jar:
        data = jar.read(member)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def check(binary: Path) -> int:
    """Run ``binary`` on trec_eval's test files; the number of per-query values compared with its published
    output (``out.test.aq``) for the measures the benchmark times. Raises ``SystemExit`` on any difference."""
    from benchmarks.bench_cli import MEASURES  # here: bench_cli imports this module

    argv = [str(binary), "-q"] + [f"-m{m}" for m in MEASURES]
    argv += [str(TREC_DATA / "qrels.test"), str(TREC_DATA / "results.test")]
    got = _lines(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    expected = _lines((TREC_DATA / "out.test.aq").read_text())
    compared = 0
    for key, value in got.items():
        if key[0] in ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret"):
            continue
        if expected.get(key) != value:
            raise SystemExit(f"{binary}: {key} = {value}, trec_eval's published output: {expected.get(key)}")
        compared += 1
    if compared == 0:
        raise SystemExit(f"{binary}: printed no value to compare")
    return compared


def _lines(text: str) -> dict[tuple[str, str], str]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3:
            out[(parts[0], parts[1])] = parts[2]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="a pyserini 0.39.0 wheel already downloaded (skips pip)")
    parser.add_argument("--out", type=Path, default=TARGET)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="torchrank_trec_eval_") as folder:
        wheel = args.wheel
        if wheel is None:
            pip = [sys.executable, "-m", "pip", "download", WHEEL, "--no-deps", "--only-binary", ":all:", "-d", folder]
            subprocess.run(pip, check=True)
            wheel = next(Path(folder).glob("pyserini-*.whl"))
        extract(wheel, args.out)
    compared = check(args.out)
    print(f"{args.out}: {version(args.out)}; {compared} per-query values equal trec_eval's published out.test.aq")


if __name__ == "__main__":
    main()
