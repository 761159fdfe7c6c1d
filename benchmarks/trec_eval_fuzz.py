"""Differential fuzz of ``torchrank evaluate`` against a trec_eval binary, with a minimal repro per disagreement.

``generate(seed)`` writes a qrels/run pair from a fixed seed with the edge cases trec_eval parity depends on:
graded and negative labels (each query with at least one label >= 0: trec_eval refuses a query whose labels are
all negative, torchrank evaluates it), unjudged and unretrieved documents, queries missing on either side,
queries without relevant documents, duplicate docnos (in the qrels of an evaluated query: both programs refuse
the file), ties across the ``-M`` cut, scores equal as float32 but not as doubles (``16777217``/``16777216``,
``1e39``/``1e400``, ``-0``/``0``, subnormals), runs written out of rank order, and now and then a query of
999-1,500 documents. ``FLAG_SETS`` are the command lines compared (mixes of ``-q -c -M -l -J -m all_trec``).

Run from the repository root with a binary built from usnistgov/trec_eval's source (nothing is downloaded)::

    python -m benchmarks.trec_eval_fuzz --binary PATH/trec_eval --seeds 200            # trec_eval 10.0
    python -m benchmarks.trec_eval_fuzz --binary PATH/v9/trec_eval --trec-eval 9 --seeds 200
    python -m benchmarks.trec_eval_fuzz --binary PATH/trec_eval --flags='-q -M1000 -J -m all_trec' --flags=-c

Each seed is evaluated under every flag set by the binary and by ``torchrank evaluate`` in this process, and the
outputs compared byte for byte (a file both programs refuse counts as agreement). For each disagreement the qrels
and run lines are shrunk (delta debugging) while the first differing measure still differs, and the minimal repro
is printed: flags, qrels lines, run lines and both outputs.

trec_eval 10.0 exits with status 4 (``result qid ... not found in qrels``) when a qrels query has no line in the
run and ``-c`` is not given; ``torchrank evaluate``, like 9.x, evaluates the shared queries (docs/cli.md). For
those the reference is the binary's output on the qrels without the queries the run lacks, and the count of such
comparisons is reported apart.

``python -m benchmarks.trec_eval_fuzz --record tests/data/trec_eval_parity.json.gz --binary V10 --binary9 V9
--seed-list 29,168,136,190,256`` wrote the committed parity data that ``tests/test_trec_eval_outputs.py`` compares
without any binary (seeds chosen to cover the edge cases above between them; 256 holds a duplicate).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

FLAG_SETS: tuple[tuple[str, ...], ...] = (
    (),
    ("-q", "-m", "all_trec"),
    ("-q", "-c", "-m", "all_trec"),
    ("-q", "-M5", "-m", "all_trec"),
    ("-q", "-J", "-m", "all_trec"),
    ("-q", "-l2", "-m", "all_trec"),
    ("-q", "-c", "-l2", "-m", "all_trec"),
    ("-q", "-M5", "-J", "-m", "all_trec"),
    ("-q", "-c", "-M20", "-J", "-m", "all_trec"),
    ("-q", "-c", "-J", "-l2", "-m", "all_trec"),
    ("-q", "-c", "-M3", "-l3", "-m", "all_trec"),
    ("-q", "-m", "ndcg_cut.3,7", "-m", "P.3", "-m", "relstring.5", "-m", "iprec_at_recall..25,.5", "-m", "G"),
)
#: Scores that pair up as equal in float32 but not as doubles (and a few that are equal as both).
_CLOSE_SCORES = (
    ("16777217", "16777216"),
    ("0.1000000001", "0.1000000002"),
    ("1e39", "1e400"),
    ("1e-320", "0"),
    ("-0", "0"),
    ("3.0000001", "3"),
)
_LABELS = (-1, -2, 0, 0, 0, 1, 1, 1, 2, 3, 4)


def generate(seed: int) -> tuple[str, str]:
    """A qrels file and a run file (their text) from ``seed``."""
    rng = random.Random(seed)
    qrels: list[str] = []
    run: list[str] = []
    num_q = rng.randint(3, 9)
    long_query = rng.randrange(num_q) if rng.random() < 0.25 else -1
    tag = f"run{seed % 7}"
    for q in range(num_q):
        qid = rng.choice(("q", "", "Q")) + str(q + rng.randrange(3) * 10)
        if any(line.split()[0] == qid for line in qrels + run):
            qid += "x"
        shape = rng.random()
        pool = [_docno(rng) for _ in range(rng.randint(1, 80))]
        pool = list(dict.fromkeys(pool))
        if q == long_query:
            long_list = [f"L{j}" for j in range(rng.randint(999, 1500))]
            pool = list(dict.fromkeys(pool + long_list))
        retrieved = [d for d in pool if rng.random() < 0.7] or pool[:1]
        if q == long_query:  # every document of the long list retrieved: 999-1,500 of them and a few more
            retrieved = list(dict.fromkeys(retrieved + long_list))
        judged = [d for d in pool if rng.random() < 0.6]
        judged += [f"u{q}-{j}" for j in range(rng.randrange(4))]  # judged, never retrieved
        if shape < 0.12:
            judged = []  # a run query without qrels
        elif shape < 0.22:
            retrieved = []  # a qrels query without run lines
        no_relevant = rng.random() < 0.15
        labels = [min(label, 0) if no_relevant else label for label in (rng.choice(_LABELS) for _ in judged)]
        if labels and max(labels) < 0:  # trec_eval refuses a query whose labels are all negative (docs/cli.md)
            labels[rng.randrange(len(labels))] = 0
        qrels += [f"{qid} 0 {doc} {label}" for doc, label in zip(judged, labels, strict=True)]
        if judged and retrieved and rng.random() < 0.01:  # refused by both programs
            qrels.append(f"{qid} 0 {judged[0]} 1")
        run += _ranking(rng, qid, retrieved, tag)
    if not any(line.split()[0] in {r.split()[0] for r in run} for line in qrels):  # at least one shared query
        qid = qrels[0].split()[0] if qrels else "q0"
        if not qrels:
            qrels.append(f"{qid} 0 d1 1")
        run.append(f"{qid} Q0 {qrels[0].split()[2]} 1 1.5 {tag}")
    if not run:
        run.append(f"{qrels[0].split()[0]} Q0 d1 1 1 {tag}")
    if rng.random() < 0.3:
        rng.shuffle(run)
    if rng.random() < 0.3:
        rng.shuffle(qrels)
    if rng.random() < 0.2:  # the runid trec_eval prints is the last line's
        run[-1] = " ".join([*run[-1].split()[:5], tag + "-last"])
    return "".join(line + "\n" for line in qrels), "".join(line + "\n" for line in run)


def _docno(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.6:
        return f"d{rng.randrange(120)}"
    if kind < 0.8:
        return f"D{rng.randrange(30)}-{rng.choice('abc')}"
    return rng.choice(("a", "b", "aa", "Z", "z9", "d-1", "d_1", "d1.0", "d01"))


def _ranking(rng: random.Random, qid: str, docs: list[str], tag: str) -> list[str]:
    """Run lines for ``docs``: coarse scores (ties, many across the -M cuts), close pairs, a share of negatives."""
    lines = []
    coarse = rng.random() < 0.5
    for rank, doc in enumerate(docs, 1):
        pick = rng.random()
        if pick < 0.08:
            score = rng.choice(rng.choice(_CLOSE_SCORES))
        elif coarse:
            score = rng.choice(("3", "2.5", "2.5", "1", "0", "-1.25"))
        else:
            score = f"{rng.uniform(-5, 20):.{rng.choice((1, 3, 6, 9))}f}"
        lines.append(f"{qid}{rng.choice((' ', chr(9), '  '))}Q0 {doc} {rank} {score} {tag}")
    return lines


@dataclass
class Outcome:
    """One program's answer: exit status and standard output."""

    rc: int
    out: str
    err: str = ""

    def same(self, other: Outcome) -> bool:
        """Equal outputs, or both refused the input."""
        return (self.rc != 0 and other.rc != 0) or (self.rc == other.rc and self.out == other.out)


def run_binary(binary: str | Path, flags: Sequence[str], qrels: str, run: str) -> tuple[Outcome, bool]:
    """The binary's answer, and whether the qrels lost the queries the run lacks (10.0 without ``-c`` exits 4
    on them; the answer is then the binary's on the shared queries, as 9.x and ``torchrank evaluate`` read it)."""
    out = _exec(binary, flags, qrels, run)
    if out.rc == 4 and "not found in qrels" in out.err and "-c" not in flags and _missing_from_run(qrels, run):
        run_qids = {line.split()[0] for line in run.splitlines() if line.split()}
        kept = "".join(line + "\n" for line in qrels.splitlines() if line.split() and line.split()[0] in run_qids)
        return _exec(binary, flags, kept, run), True
    return out, False


def _missing_from_run(qrels: str, run: str) -> bool:
    run_qids = {line.split()[0] for line in run.splitlines() if line.split()}
    return any(line.split()[0] not in run_qids for line in qrels.splitlines() if line.split())


def _exec(binary: str | Path, flags: Sequence[str], qrels: str, run: str) -> Outcome:
    with tempfile.TemporaryDirectory() as folder:
        q, r = Path(folder, "qrels"), Path(folder, "run")
        q.write_text(qrels)
        r.write_text(run)
        done = subprocess.run([str(binary), *flags, str(q), str(r)], capture_output=True, text=True)
    return Outcome(done.returncode, done.stdout, done.stderr)


def run_torchrank(flags: Sequence[str], qrels: str, run: str, trec_eval: str = "10") -> Outcome:
    """``torchrank evaluate`` in this process (no interpreter start-up per call)."""
    from torchrank.cli import main

    with tempfile.TemporaryDirectory() as folder:
        q, r = Path(folder, "qrels"), Path(folder, "run")
        q.write_text(qrels)
        r.write_text(run)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["evaluate", "--trec-eval", trec_eval, *flags, str(q), str(r)])
    return Outcome(rc, out.getvalue())


def first_difference(ours: Outcome, theirs: Outcome) -> str | None:
    """The first differing output line's measure name (``"rc"`` when only one program refused), or None."""
    if ours.same(theirs):
        return None
    if (ours.rc == 0) != (theirs.rc == 0):
        return "rc"
    a, b = ours.out.splitlines(), theirs.out.splitlines()
    for x, y in zip(a, b, strict=False):
        if x != y:
            return (y if y.split("\t")[0].strip() else x).split("\t")[0].strip()  # the reference's measure
    return "length"


def shrink(lines: list[str], still_fails: Callable[[list[str]], bool]) -> list[str]:
    """Delta debugging (ddmin): a small sublist of ``lines`` for which ``still_fails`` holds."""
    n = 2
    while len(lines) >= 2:
        chunk = max(len(lines) // n, 1)
        for start in range(0, len(lines), chunk):
            rest = lines[:start] + lines[start + chunk :]
            if rest and still_fails(rest):
                lines, n = rest, max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(n * 2, len(lines))
    return lines


def minimal_repro(
    binary: str | Path, flags: Sequence[str], qrels: str, run: str, trec_eval: str = "10"
) -> tuple[str, str, str]:
    """Shrunk qrels and run text on which the first differing measure still differs, and that measure."""
    def difference(q: str, r: str) -> str | None:
        return first_difference(run_torchrank(flags, q, r, trec_eval), run_binary(binary, flags, q, r)[0])

    target = difference(qrels, run)
    if target is None:
        return qrels, run, ""

    def text(lines: list[str]) -> str:
        return "".join(line + "\n" for line in lines)

    q_lines, r_lines = qrels.splitlines(), run.splitlines()
    r_lines = shrink(r_lines, lambda lines: difference(text(q_lines), text(lines)) == target)
    q_lines = shrink(q_lines, lambda lines: difference(text(lines), text(r_lines)) == target)
    r_lines = shrink(r_lines, lambda lines: difference(text(q_lines), text(lines)) == target)
    return text(q_lines), text(r_lines), target


def fuzz(binary: str | Path, seeds: Sequence[int], trec_eval: str = "10", flag_sets=FLAG_SETS, repro: bool = True):
    """Compare every seed under every flag set; print a minimal repro per disagreement; return the counts."""
    counts = {"compared": 0, "agree": 0, "disagree": 0, "both_refused": 0, "shared_queries_only": 0, "lines": 0}
    by_measure: dict[str, int] = {}
    for seed in seeds:
        qrels, run = generate(seed)
        for flags in flag_sets:
            theirs, restricted = run_binary(binary, flags, qrels, run)
            ours = run_torchrank(flags, qrels, run, trec_eval)
            counts["compared"] += 1
            counts["shared_queries_only"] += restricted
            counts["lines"] += theirs.out.count("\n")
            where = first_difference(ours, theirs)
            if where is None:
                counts["agree"] += 1
                counts["both_refused"] += theirs.rc != 0
                continue
            counts["disagree"] += 1
            by_measure[where] = by_measure.get(where, 0) + 1
            print(f"seed {seed} flags {' '.join(flags) or '(none)'}: first difference at {where}", flush=True)
            if repro and by_measure[where] <= 2:
                q, r, _ = minimal_repro(binary, flags, qrels, run, trec_eval)
                ours, theirs = run_torchrank(flags, q, r, trec_eval), run_binary(binary, flags, q, r)[0]
                print("  qrels:\n" + _indent(q) + "  run:\n" + _indent(r))
                only_ours, only_theirs = _diff_lines(ours.out, theirs.out), _diff_lines(theirs.out, ours.out)
                print(f"  torchrank (rc {ours.rc}), lines trec_eval lacks:\n{_indent(only_ours)}"
                      f"  trec_eval (rc {theirs.rc}), lines torchrank lacks:\n{_indent(only_theirs)}", flush=True)
    return counts, by_measure


def _diff_lines(a: str, b: str) -> str:
    other = set(b.splitlines())
    return "".join(line + "\n" for line in a.splitlines() if line not in other)


def _indent(text: str) -> str:
    return "".join("    " + line + "\n" for line in text.splitlines())


def record(path: Path, binary10: str, binary9: str, seeds: Sequence[int]) -> None:
    """Write inputs and both binaries' outputs under every flag set (gzip JSON) for the parity test."""
    cases = []
    for seed in seeds:
        qrels, run = generate(seed)
        outputs: dict[str, list] = {}
        for version, binary in (("10", binary10), ("9", binary9)):
            outputs[version] = []
            for flags in FLAG_SETS:
                out, restricted = run_binary(binary, flags, qrels, run)
                outputs[version].append({"flags": list(flags), "rc": out.rc, "stdout": out.out,
                                         "shared_queries_only": restricted})
        cases.append({"seed": seed, "qrels": qrels, "run": run, "outputs": outputs})
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump({"generator": "benchmarks.trec_eval_fuzz.generate", "cases": cases}, f, separators=(",", ":"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True, help="trec_eval binary built from usnistgov/trec_eval")
    parser.add_argument("--seeds", type=int, default=50, help="number of seeds (default 50)")
    parser.add_argument("--start", type=int, default=1000, help="first seed (default 1000: past the recorded ones)")
    parser.add_argument("--trec-eval", choices=("10", "9"), default="10", help="torchrank's --trec-eval semantics")
    parser.add_argument("--no-repro", action="store_true", help="count only, no shrinking")
    parser.add_argument("--record", type=Path, help="write the parity test data here instead of fuzzing")
    parser.add_argument("--binary9", help="with --record: the trec_eval 9.x binary")
    parser.add_argument("--seed-list", help="comma-separated seeds instead of --start/--seeds")
    parser.add_argument("--flags", action="append", metavar="FLAGS",
                        help="a flag set to compare instead of FLAG_SETS (repeatable), e.g. "
                        "--flags='-q -c -M1000 -J -m all_trec'")
    args = parser.parse_args(argv)
    seeds = range(args.start, args.start + args.seeds)
    if args.seed_list:
        seeds = [int(x) for x in args.seed_list.split(",")]
    if args.record:
        record(args.record, args.binary, args.binary9, seeds)
        return 0
    flag_sets = tuple(tuple(flags.split()) for flags in args.flags) if args.flags else FLAG_SETS
    counts, by_measure = fuzz(args.binary, seeds, args.trec_eval, flag_sets, repro=not args.no_repro)
    print(json.dumps({"seeds": [seeds[0], seeds[-1]], **counts, "first_difference_by_measure": by_measure}))
    return 1 if counts["disagree"] else 0


if __name__ == "__main__":
    sys.exit(main())
