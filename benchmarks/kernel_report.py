"""Static cost of the triton backend's fused kernel, compiled ahead of time for GPUs this machine need not have.

``python -m benchmarks.kernel_report --arch 80,90 --json`` compiles, with no GPU, a grid of the kernel variants the
dispatcher launches (measure families, tie modes, mask and ``ideal_target``, list blocks 16 to 4,096: the
compile-time arguments come from the dispatcher's own ``launch_config``; a request of several measures is a variant
of its own, so the grid samples those) for each architecture, and prints one JSON object per
line: ``arch``, ``measures`` (registry names), ``ties``, ``block``, ``mask``, ``ideal``, ``kernel`` (``"sort"``,
``"select"`` or ``"counts"``), ``registers``, ``spills`` (bytes of local memory per thread: ptxas' stack frame),
``sass_instructions`` (every instruction of the cubin's SASS, the alignment NOPs at its end included), ``compiled``
(False with ``error`` where the compile failed: the dispatcher would then fall back to torch with a warning) and
``commit`` (the tree's short commit, ``+uncommitted`` where ``torchrank/`` differs from it).

Registers and spills come from ``cuobjdump -res-usage``, the SASS from ``cuobjdump -sass``, both run on the cubin;
``cuobjdump`` ships with triton's wheel (``triton/backends/nvidia/bin``). Triton's own cache (``TRITON_CACHE_DIR``,
default ``~/.triton/cache``) keeps compiled variants, so a second report of an unchanged kernel reads them back.

The grid's defaults cover those axes; ``--measures``, ``--ties``, ``--blocks``, ``--mask``, ``--ideal`` narrow it.
Not on the grid: lists under 16 items (blocks 1 to 8), ``empty_target_action="error"``'s flags, value checks off,
and the integer arguments triton specializes when they equal 1 (:func:`compile_variant` takes each; the compile
test covers one such variant). Inputs are float32 scores and int64 labels (another dtype is another pointer type:
the same code, other loads).
Static counts are a proxy: see docs/backends.md for what they predict and where they mislead.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

BLOCKS = tuple(2**i for i in range(4, 13))  # 16 .. 4096
TIES = ("first", "average", "optimistic", "pessimistic")
# the gpu_floor benchmark's set of 8 (six families); R-precision beside a cut-off (its threshold in the selection)
EIGHT = ("ndcg@5", "ndcg@10", "ndcg@20", "map@100", "mrr@10", "P@10", "recall@100", "err@20")
RPREC_SELECT = ("rprec", "ndcg@10")


def fused_names() -> list[str]:
    """A name per measure family the fused kernel computes, at a cut-off of 10 and over the whole list."""
    from torchrank.functional._measure import fused_columns
    from torchrank.functional.measures import FAMILIES

    names = []
    for name, spec in FAMILIES.items():
        if fused_columns(spec.kernel, [10], dict(spec.params)) is None:
            continue
        names += [f"{name}@10", name] if spec.takes_k else [name]
    return names


def columns_of(measures: tuple[str, ...]) -> list:
    """The kernel's output columns for ``measures`` (grammar names), as ``evaluate`` asks for them."""
    from torchrank.functional._measure import fused_columns
    from torchrank.functional.measures import FAMILIES, parse_measure

    columns = []
    for name in measures:
        parsed = parse_measure(name)
        spec = FAMILIES[parsed.family]
        found = fused_columns(spec.kernel, [parsed.k], spec.kernel_params(**dict(parsed.params)))
        if found is None:
            raise ValueError(f"The fused kernel does not compute {name!r}.")
        columns += found
    return columns


def _signature(kernel, has_mask: bool, has_ideal: bool) -> dict[str, str]:
    types = {"preds_ptr": "*fp32", "target_ptr": "*i64", "mask_ptr": "*i1" if has_mask else "*fp32",
             "ideal_ptr": "*i64" if has_ideal else "*fp32", "cuts_ptr": "*i32", "rbp_ptr": "*fp32",
             "out_ptr": "*fp32", "flags_ptr": "*u8", "mixed_ptr": "*u8", "problems_ptr": "*i32",
             "threshold": "fp32", "fill": "fp32"}
    return {name: types.get(name, "i32") for name in kernel.arg_names}


def _tool(name: str) -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def cubin_counts(cubin: bytes, scratch: Path) -> dict[str, int]:
    """Registers, spill bytes and SASS instructions of one cubin, read by cuobjdump."""
    path = scratch / f"k{os.getpid()}.cubin"
    path.write_bytes(cubin)
    usage = subprocess.run([_tool("cuobjdump"), "-res-usage", str(path)], capture_output=True, text=True,
                           check=True).stdout
    sass = subprocess.run([_tool("cuobjdump"), "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+)", usage)
    return {"registers": int(found[1]), "spills": int(found[2]),
            "sass_instructions": len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, re.MULTILINE))}


def compile_variant(variant: dict) -> dict:
    """Compile one variant (a grid point) for its architecture; its row of the report. Optional keys: ``errors``
    (``empty_target_action="error"``'s flags, default False), ``check_values`` (default True) and ``ones``: integer
    arguments compiled as the constant 1, as triton's launcher specializes an integer argument equal to 1 (a list of
    one item: ``n``, ``m`` and the row strides; a deepest cut-off of 1: ``deepest``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from torchrank.functional.backends._triton import kernel as fused

    columns = columns_of(tuple(variant["measures"]))
    config = fused.launch_config(columns, n=variant["block"], m=variant["block"], ties=variant["ties"],
                                 has_mask=variant["mask"], has_ideal=variant["ideal"],
                                 errors=variant.get("errors", False), check_values=variant.get("check_values", True))
    num_warps = config.pop("num_warps")
    kernel = fused.fused_kernel
    row = {**variant, "kernel": "counts" if config["COUNTS"] else "select" if config["DEPTH"] else "sort"}
    names = kernel.arg_names
    constants = {**config, **dict.fromkeys(variant.get("ones", ()), 1)}
    source = ASTSource(fn=kernel, signature={**_signature(kernel, variant["mask"], variant["ideal"]),
                                             **{name: "constexpr" for name in constants}},
                       constexprs={(names.index(name),): value for name, value in constants.items()})
    try:
        compiled = triton.compile(source, target=GPUTarget("cuda", variant["arch"], 32),
                                  options={"num_warps": num_warps})
    except Exception as error:  # a failed compile is a row of the report, not its end
        return {**row, "compiled": False, "error": f"{type(error).__name__}: {str(error)[:300]}"}
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    return {**row, **cubin_counts(compiled.asm["cubin"], scratch), "compiled": True}


def grid(archs, measure_sets, ties, blocks, masks, ideals) -> Iterator[dict]:
    for arch, measures, tie, block, mask, ideal in itertools.product(archs, measure_sets, ties, blocks, masks, ideals):
        yield {"arch": arch, "measures": list(measures), "ties": tie, "block": block, "mask": mask, "ideal": ideal}


def _flags(text: str) -> list[bool]:
    return [{"0": False, "1": True, "false": False, "true": True}[t] for t in text.lower().split(",")]


def _commit() -> str | None:
    """The kernel's source: its short commit, marked where ``torchrank/`` holds uncommitted changes (None off git)."""
    from benchmarks._records import _git  # imports torch and torchrank: only when a report runs, as compile_variant

    commit, changed = _git("rev-parse", "--short", "HEAD"), _git("status", "--porcelain", "--", "torchrank")
    return None if commit is None else commit + ("+uncommitted" if changed else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="80,90", help="compute capabilities, e.g. 80,90")
    parser.add_argument("--measures", action="append",
                        help="a comma-separated set of measure names (repeat for more sets); default: each family "
                             "the kernel computes alone, at 10 and whole, the set of 8 and rprec,ndcg@10")
    parser.add_argument("--ties", default=",".join(TIES))
    parser.add_argument("--blocks", default=",".join(map(str, BLOCKS)))
    parser.add_argument("--mask", default="0,1", help="0, 1 or 0,1")
    parser.add_argument("--ideal", default="0,1", help="0, 1 or 0,1")
    parser.add_argument("--jobs", type=int, default=1, help="compiles in parallel")
    parser.add_argument("--json", action="store_true", help="JSON lines (else a table)")
    parser.add_argument("--out", type=Path, help="also write the JSON lines here")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        parser.error("unset TRITON_INTERPRET: the interpreter's kernels cannot be compiled")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # triton's default today, said so (silences its warning)
    sets = [tuple(s.split(",")) for s in args.measures] if args.measures else \
        [(name,) for name in fused_names()] + [EIGHT, RPREC_SELECT]
    variants = list(grid([int(a) for a in args.arch.split(",")], sets, args.ties.split(","),
                         [int(b) for b in args.blocks.split(",")], _flags(args.mask), _flags(args.ideal)))
    rows, commit = [], _commit()
    with ProcessPoolExecutor(args.jobs) if args.jobs > 1 else contextlib.nullcontext() as pool:
        for row in (pool.map if pool else map)(compile_variant, variants):
            row["commit"] = commit
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"sm_{row['arch']} {','.join(row['measures']):<24} {row['ties']:<11} {row['block']:>5} "
                      f"mask={int(row['mask'])} ideal={int(row['ideal'])} {row['kernel']:<6} "
                      + (f"{row['registers']:>3} regs {row['spills']:>5} B spilled {row['sass_instructions']:>6} SASS"
                         if row["compiled"] else f"FAILED {row['error']}"), flush=True)
    if args.out:
        args.out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return 0 if all(row["compiled"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
