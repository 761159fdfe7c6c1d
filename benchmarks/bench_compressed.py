"""``score_run`` on a gzipped (and bz2/xz) TREC run against the same run as plain text.

Run from the repository root::

    python -m benchmarks.bench_compressed            # 7,000 queries x 1,000 documents (7M run lines), gzip only
    python -m benchmarks.bench_compressed --all      # also .bz2, .xz and the run as parquet (pyarrow)
    python -m benchmarks.bench_compressed --smoke    # 200 x 100

The files are :func:`benchmarks.bench_cli.generate`'s (random scores in rank order, 6 decimals; qrels of 20 judged
documents per query), written into a temporary folder and compressed there with the standard library at its default
level; nothing is committed but the results. Each round times ``score_run(qrels, run, MEASURES)`` (reading,
decompressing, parsing and evaluating: what a user waits for) on the plain and on each compressed run, in turn,
``repeats`` rounds (``--all``: also the run as parquet); every file's means must equal the plain run's. The promise
of issue 22: a gzipped run evaluates in at most 1.5x the plain file's time. Writes
``benchmarks/results/compressed_cpu.json`` and ``.md`` (``--smoke``: ``compressed_cpu_smoke.*``).
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import lzma
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_cli import MEASURES, _metadata, generate

RESULTS = Path(__file__).resolve().parent / "results"
OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def _compress(path: Path, suffix: str) -> Path:
    target = path.with_name(path.name + suffix)
    with open(path, "rb") as src, OPENERS[suffix](target, "wb") as dst:
        shutil.copyfileobj(src, dst, 16 << 20)
    return target


def _parquet(path: Path) -> Path:
    """The run as a parquet file with PyTerrier's columns (qid, docno, score), converted by pyarrow."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    names = ["qid", "q0", "docno", "rank", "score", "tag"]
    table = pacsv.read_csv(
        path, read_options=pacsv.ReadOptions(column_names=names),
        parse_options=pacsv.ParseOptions(delimiter=" "),
        convert_options=pacsv.ConvertOptions(column_types={"qid": pa.string(), "docno": pa.string()}),
    )  # fmt: skip
    target = path.with_suffix(".parquet")
    pq.write_table(table.select(["qid", "docno", "score"]), target)
    return target


def measure(queries: int, docs: int, repeats: int, suffixes: list[str]) -> dict:
    from torchrank.io.trec_eval import score_run

    with tempfile.TemporaryDirectory() as folder:
        qrels, plain = generate(Path(folder), queries, docs, judged=20, seed=0)
        runs = {"plain": plain} | {s: _parquet(plain) if s == ".parquet" else _compress(plain, s) for s in suffixes}
        reference = score_run(qrels, plain, MEASURES).summary()
        for name, path in runs.items():
            if score_run(qrels, path, MEASURES).summary() != reference:
                raise AssertionError(f"{name}: means differ from the plain run's")
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeats):  # round robin: a slow moment of the machine hits every file alike
            for name, path in runs.items():
                start = time.perf_counter()
                score_run(qrels, path, MEASURES)
                times[name].append(time.perf_counter() - start)
        sizes = {name: path.stat().st_size for name, path in runs.items()}
    median = {name: statistics.median(t) for name, t in times.items()}
    return {
        "queries": queries,
        "docs": docs,
        "lines": queries * docs,
        "measures": MEASURES,
        "bytes": sizes,
        "seconds": times,
        "median_s": median,
        "ratio_to_plain": {name: median[name] / median["plain"] for name in runs},
    }


def _markdown(record: dict, meta: dict) -> str:
    lines = [
        f"# Compressed TREC runs: `score_run` on {record['lines']:,} run lines ({record['queries']:,} queries x "
        f"{record['docs']:,} documents), {len(record['measures'])} measures",
        "",
        f"commit {meta['commit'][:7]}, {meta['platform']}, {meta['cpu_count']} CPUs, torch threads "
        f"{meta['torch_threads']}, load average {meta['load_average']}",
        "",
        "| run file | size (MiB) | median time (s) | runs (s) | x plain |",
        "|---|---:|---:|---|---:|",
    ]
    for name, t in record["seconds"].items():
        lines.append(
            f"| {name} | {record['bytes'][name] / 2**20:.1f} | {record['median_s'][name]:.2f} | "
            f"{', '.join(f'{x:.2f}' for x in t)} | {record['ratio_to_plain'][name]:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--all", action="store_true", help="also .bz2 and .xz")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    queries, docs = (200, 100) if args.smoke else (7000, 1000)
    record = measure(queries, docs, args.repeats, [".gz", ".bz2", ".xz", ".parquet"] if args.all else [".gz"])
    meta = _metadata()
    stem = "compressed_cpu_smoke" if args.smoke else "compressed_cpu"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps({"meta": meta, "record": record}, indent=2) + "\n")
    (RESULTS / f"{stem}.md").write_text(_markdown(record, meta))
    print(_markdown(record, meta))


if __name__ == "__main__":
    main()
