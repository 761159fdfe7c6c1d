"""Workload ``losses``: ``torchrank.losses`` against allRank 1.4.3, forward + backward on CPU (or a GPU).

    python -m benchmarks.bench_losses                 # configs/bench/losses.yaml -> benchmarks/results/losses_cpu.*
    python -m benchmarks.bench_losses --smoke         # tiny lists, results in a temporary folder
    python -m benchmarks.run --config configs/bench/losses.yaml   # the same through the harness

Each case (library x loss x list size N, batch B = 8) runs in its own subprocess, so that its peak memory is its
own: the child builds the inputs (``randn`` scores, ``randint(0, 5)`` labels, no padding; seeded), resets the
kernel's peak-RSS counter (``/proc/self/clear_refs``), calls ``loss(scores, labels).backward()`` once untimed
(warm-up) and then ``repeats`` more times (more while under ``min_run_time``; only ``slow_repeats`` when one call
takes over ``slow_threshold_s``), each timed with ``time.perf_counter``. Records: median and IQR per call, and
``peak_mem_mb``, the peak resident memory those calls added over what the process held before the first call
(absolute peak RSS in ``extra``). On CUDA: ``torch.cuda.max_memory_allocated`` over the calls instead. Each case
runs ``rounds`` times (default 2), the contenders of a workload alternating round by round, and the samples are
pooled: on a shared machine whose speed drifts by 2-3x over minutes, a slow phase then falls on every contender
instead of on one side of a ratio.

allRank 1.4.3 is used unmodified, through ``allrank.models.losses``. Its package pins torch <= 1.8 and imports
torchvision and gcsfs at module level for its data loading and cloud paths; the loss functions use neither, so
install it with ``pip install --no-deps allRank==1.4.3`` and, where torchvision/gcsfs are missing, empty stand-in
modules satisfy those imports (:func:`import_allrank`). Without allRank its cases are skipped with a note.

Correctness guard: every allRank value is compared with torchrank's value of the same quantity on the same input
(NeuralNDCG with allRank's 50 Sinkhorn iterations; LambdaLoss summed as allRank sums; RankNet weighted per pair as
allRank averages); a difference above ``tolerance`` (relative) aborts the run. ListMLE is not compared: both
order tied labels at random.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import torch

from benchmarks._records import REPO_ROOT

KIND = "losses"
LIBRARIES = ("torchrank", "allrank")
# loss -> {library: (call name, role)}; the torchrank call of role "primary" is the default configuration
CALLS: dict[str, dict[str, list[tuple[str, str]]]] = {
    "neural_ndcg": {
        "torchrank": [("neural_ndcg", "primary"), ("neural_ndcg(sinkhorn_iterations=50)", "variant")],
        "allrank": [("neuralNDCG", "incumbent")],
    },
    "approx_ndcg": {"torchrank": [("approx_ndcg", "primary")], "allrank": [("approxNDCGLoss", "incumbent")]},
    "lambda_loss": {
        "torchrank": [("lambda_loss", "primary")],
        "allrank": [("lambdaLoss(weighing_scheme='ndcgLoss2PP_scheme')", "incumbent")],
    },
    "soft_err": {"torchrank": [("soft_err", "primary")], "allrank": []},
    "listnet": {"torchrank": [("listnet", "primary")], "allrank": [("listNet", "incumbent")]},
    "listmle": {"torchrank": [("listmle", "primary")], "allrank": [("listMLE", "incumbent")]},
    "ranknet": {"torchrank": [("ranknet", "primary")], "allrank": [("rankNet", "incumbent")]},
}
DEFAULTS: dict[str, Any] = {
    "list_sizes": [128, 512, 1024],
    "batch_size": 8,
    "losses": list(CALLS),
    "libraries": list(LIBRARIES),
    "num_labels": 5,
    "seed": 0,
    "threads": 1,
    "device": "cpu",
    "tolerance": 1e-4,
    "rounds": 2,
    "timing": {},
}
TIMING = {"min_run_time": 1.0, "repeats": 5, "slow_threshold_s": 3.0, "slow_repeats": 2, "case_timeout_s": 1200}
SMOKE = {
    "rounds": 1,
    "list_sizes": [16],
    "losses": ["neural_ndcg", "approx_ndcg", "lambda_loss"],
    "timing": {"min_run_time": 0.0, "repeats": 1, "slow_repeats": 1},
}
# the targets at N = 1024, reported (never asserted), at equal work (NeuralNDCG: 50 Sinkhorn iterations,
# allRank's count): (loss, torchrank call, minimum speed-up over allRank, memory cap MB)
TARGETS = [
    ("neural_ndcg", "neural_ndcg(sinkhorn_iterations=50)", 20.0, 400.0),
    ("approx_ndcg", "approx_ndcg", 1.0, None),
    ("lambda_loss", "lambda_loss", 1.0, None),
]


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- allRank
def import_allrank() -> Any:
    """``allrank.models.losses`` (1.4.3, unmodified), with empty stand-ins for the modules its package imports
    for data loading and cloud storage (torchvision, gcsfs, pkg_resources) when they are not installed.

    The stand-ins are only in ``sys.modules`` while allRank imports: another library that probes for gcsfs
    (Lightning does) must not find an empty one afterwards.
    """
    added = [name for name in ("torchvision", "gcsfs", "pkg_resources") if _missing(name)]
    for name in added:
        _stand_in(name)
    if "torchvision" in added:
        sys.modules["torchvision"].transforms = _stand_in("torchvision.transforms", Compose=object)  # type: ignore[attr-defined]
        added.append("torchvision.transforms")
    if "pkg_resources" in added:
        sys.modules["pkg_resources"].__dict__.update(Requirement=object, resource_filename=lambda *args: None)
    try:
        return importlib.import_module("allrank.models.losses")
    finally:
        for name in added:
            sys.modules.pop(name, None)


def _missing(name: str) -> bool:
    if name in sys.modules:
        return False
    try:
        return importlib.util.find_spec(name) is None
    except ValueError:  # a module without a spec
        return False


def _stand_in(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def allrank_available() -> str | None:
    """None when allRank's losses import; else why not. Checked in a subprocess: the stand-in modules stay there."""
    if importlib.util.find_spec("allrank") is None:
        return "allRank not installed (pip install --no-deps allRank==1.4.3)"
    done = subprocess.run(
        [sys.executable, "-c", "from benchmarks.bench_losses import import_allrank; import_allrank()"],
        cwd=REPO_ROOT,
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        return f"allRank does not import: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else '?'}"
    return None


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}


# ----------------------------------------------------------------------------------------------- the calls
def make_inputs(batch: int, n: int, num_labels: int, seed: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(batch, n, generator=g).to(device)
    labels = torch.randint(0, num_labels, (batch, n), generator=g).to(device)
    return scores, labels


def build_call(library: str, call: str) -> Any:
    """``fn(scores, labels) -> loss`` for one call name of :data:`CALLS`."""
    if library == "torchrank":
        import torchrank.losses as losses

        if call == "neural_ndcg(sinkhorn_iterations=50)":
            return lambda s, y: losses.neural_ndcg(s, y, sinkhorn_iterations=50)
        return getattr(losses, call)
    ar = import_allrank()
    if call.startswith("lambdaLoss"):
        return lambda s, y: ar.lambdaLoss(s, y.float(), weighing_scheme="ndcgLoss2PP_scheme")
    fn = getattr(ar, call)
    return lambda s, y: fn(s, y.float())


def _status_mb(field: str) -> float | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(found.group(1)) / 1024 if found else None


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # Linux >= 4.0: VmHWM := VmRSS
    except OSError:
        return False
    return True


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """Time one case in this process (the child): warm-up, then timed forward + backward calls."""
    torch.set_num_threads(int(case["threads"]))
    device = case["device"]
    scores, labels = make_inputs(case["batch_size"], case["n"], case["num_labels"], case["seed"], device)
    fn = build_call(case["library"], case["call"])
    timing = {**TIMING, **case.get("timing", {})}
    cuda = device.startswith("cuda")

    def step() -> float:
        s = scores.clone().requires_grad_(True)
        loss = fn(s, labels)
        loss.backward()
        return float(loss.detach())

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    reset = _reset_peak_rss()
    rss_before = _status_mb("VmRSS")
    started = time.perf_counter()
    value = step()
    if cuda:
        torch.cuda.synchronize()
    first = time.perf_counter() - started
    repeats = timing["slow_repeats"] if first > timing["slow_threshold_s"] else timing["repeats"]
    samples: list[float] = []
    while len(samples) < repeats or (sum(samples) < timing["min_run_time"] and len(samples) < 1000):
        t0 = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    peak_rss = _status_mb("VmHWM") if reset else None
    out = {"samples": samples, "warm_up_s": first, "value": value, "rss_before_mb": rss_before, "peak_rss_mb": peak_rss}
    if cuda:
        out["peak_extra_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
    elif peak_rss is not None and rss_before is not None:
        out["peak_extra_mb"] = peak_rss - rss_before
    else:
        import resource  # without /proc: the process's peak, imports included (an upper bound)

        out["peak_extra_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _spawn(case: dict[str, Any]) -> dict[str, Any]:
    """Run one case in a fresh interpreter and read its JSON answer."""
    timeout = {**TIMING, **case.get("timing", {})}["case_timeout_s"]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_losses", "--case", json.dumps(case)],
        cwd=REPO_ROOT,
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"case {case['library']} {case['call']} N={case['n']} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------------- guard
def comparable_torchrank_value(loss: str, scores: torch.Tensor, labels: torch.Tensor) -> float | None:
    """torchrank's value of the quantity allRank's call returns on the same input (None: not comparable)."""
    import torchrank.losses as losses

    if loss == "neural_ndcg":
        return float(losses.neural_ndcg(scores, labels, sinkhorn_iterations=50, empty_target_action="skip"))
    if loss == "approx_ndcg":
        return float(losses.approx_ndcg(scores, labels, empty_target_action="neg"))
    if loss == "lambda_loss":
        return float(losses.lambda_loss(scores, labels, reduction="sum"))
    if loss == "listnet":
        return float(losses.listnet(scores, labels))
    if loss == "ranknet":  # allRank: mean over all pairs of the batch = per-list means weighted by pair counts
        per_list = losses.ranknet(scores.double(), labels, reduction="none").nan_to_num()
        pairs = (labels.unsqueeze(2) > labels.unsqueeze(1)).sum((1, 2)).double()
        return float((per_list * pairs).sum() / pairs.sum())
    return None


def _relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


# ----------------------------------------------------------------------------------------------- measure
def _quantiles(samples: list[float]) -> tuple[float, float, float]:
    t = torch.tensor(samples, dtype=torch.float64)
    q = torch.quantile(t, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    return float(q[0]), float(q[1]), float(q[2])


def measure(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Time every (loss, N, library) case of one ``kind: losses`` config section; records for the harness."""
    smoke = bool(config.get("smoke"))
    # a smoke run keeps an explicit choice of losses, but always runs tiny lists and short timing
    config = {**DEFAULTS, **({"losses": SMOKE["losses"]} if smoke else {}), **config}
    if smoke:
        config.update(list_sizes=SMOKE["list_sizes"], rounds=SMOKE["rounds"])
    timing = {**TIMING, **(config.get("timing") or {}), **(SMOKE["timing"] if smoke else {})}
    unknown = set(config["losses"]) - set(CALLS)
    if unknown:
        raise ValueError(f"losses: unknown {sorted(unknown)}; expected some of {sorted(CALLS)}")
    records: list[dict[str, Any]] = []
    libraries = list(config["libraries"])
    if "allrank" in libraries:
        reason = allrank_available()
        if reason is not None:
            libraries.remove("allrank")
            records.append(
                {"workload": "(all)", "library": "allrank", "name": "allRank", "kind": KIND, "skipped": reason}
            )
    batch = int(config["batch_size"])
    for n in config["list_sizes"]:
        scores, labels = make_inputs(batch, int(n), int(config["num_labels"]), int(config["seed"]), "cpu")
        for loss in config["losses"]:
            workload = f"{loss} B={batch} N={n}"
            params = {"B": batch, "N": int(n), "loss": loss, "device": config["device"], "threads": config["threads"]}
            reference = comparable_torchrank_value(loss, scores, labels) if "allrank" in libraries else None
            calls = [(library, call, role) for library in libraries for call, role in CALLS[loss][library]]
            results: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for round_ in range(int(config["rounds"])):  # the contenders alternate: a machine's slow phase hits all
                for library, call, _ in calls:
                    case = {
                        "library": library,
                        "call": call,
                        "n": int(n),
                        "batch_size": batch,
                        "num_labels": int(config["num_labels"]),
                        "seed": int(config["seed"]),
                        "threads": int(config["threads"]),
                        "device": config["device"],
                        "timing": timing,
                    }
                    _log(f"  {workload}: {library} {call} (round {round_ + 1})")
                    results.setdefault((library, call), []).append(_spawn(case))
            for library, call, role in calls:
                result = _pool(results[(library, call)])
                tolerance = float(config["tolerance"])
                records.append(_record(workload, library, call, role, params, result, loss, reference, tolerance))
    return records + _target_records(records, batch)


def _pool(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from several rounds of a case: samples pooled, the largest peak, the first warm-up and value."""
    peaks = [r["peak_rss_mb"] for r in rounds if r["peak_rss_mb"] is not None]
    return {
        **rounds[0],
        "samples": [t for r in rounds for t in r["samples"]],
        "peak_extra_mb": max(r["peak_extra_mb"] for r in rounds),
        "peak_rss_mb": max(peaks) if peaks else None,
        "rounds": len(rounds),
    }


def _record(
    workload: str,
    library: str,
    call: str,
    role: str,
    params: dict[str, Any],
    result: dict[str, Any],
    loss: str,
    reference: float | None,
    tolerance: float,
) -> dict[str, Any]:
    q1, median, q3 = _quantiles(result["samples"])
    guard = None
    if library == "allrank":
        if reference is None:
            guard = {"compared": False, "why": "random order of tied labels in both libraries"}
        else:
            rel = _relative(result["value"], reference)
            guard = {
                "compared": True,
                "allrank": result["value"],
                "torchrank": reference,
                "relative": rel,
                "max_outside": max(rel - tolerance, 0.0),
            }
            if rel > tolerance:
                raise RuntimeError(
                    f"{workload}: allRank {call} = {result['value']!r} but torchrank's comparable "
                    f"value is {reference!r} (relative difference {rel:.2e} > {tolerance})"
                )
    return {
        "workload": workload,
        "library": library,
        "name": call,
        "params": params,
        "role": role,
        "kind": KIND,
        "group": params["loss"],
        "median_s": median,
        "iqr_s": q3 - q1,
        "q1_s": q1,
        "q3_s": q3,
        "repeats": len(result["samples"]),
        "method": f"perf_counter, {result['rounds']} interleaved subprocesses",
        "peak_mem_mb": result["peak_extra_mb"],
        "guard": guard,
        "extra": {
            "peak_extra_mb": round(result["peak_extra_mb"], 1),
            "peak_rss_mb": None if result["peak_rss_mb"] is None else round(result["peak_rss_mb"], 1),
            "warm_up_s": round(result["warm_up_s"], 3),
            "value": round(result["value"], 6),
        },
    }


def _target_records(records: list[dict[str, Any]], batch: int) -> list[dict[str, Any]]:
    """The issue's targets at the largest N measured, as records without a time (shown in the tables)."""
    timed = [r for r in records if "median_s" in r]
    if not timed:
        return []
    n = max(r["params"]["N"] for r in timed)
    out = []
    for loss, call, speedup, cap in TARGETS:
        here = [r for r in timed if r["params"]["loss"] == loss and r["params"]["N"] == n]
        ours = next((r for r in here if r["library"] == "torchrank" and r["name"] == call), None)
        theirs = next((r for r in here if r["library"] == "allrank"), None)
        if ours is None:
            continue
        name = f"{call} at B={batch}, N={n}: >= {speedup:g}x allRank's speed" + (f", < {cap:g} MB" if cap else "")
        if theirs is None:
            verdict, ratio = "not compared: allRank not run", None
        else:
            ratio = theirs["median_s"] / ours["median_s"]
            holds = ratio >= speedup and (cap is None or ours["peak_mem_mb"] < cap)
            verdict = (
                f"{'holds' if holds else 'MISSED'}: {ratio:.3g}x faster; peak extra memory "
                f"{ours['peak_mem_mb']:.0f} MB (allRank {theirs['peak_mem_mb']:.0f} MB)"
            )
        out.append(
            {
                "workload": "targets",
                "library": "torchrank",
                "name": name,
                "kind": KIND,
                "params": {"N": n},
                "skipped": verdict,
                "target": {"speedup": speedup, "memory_mb": cap, "ratio": ratio},
            }
        )
    return out


# ----------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    """``--case JSON``: run one case (the subprocess side). Otherwise: the losses grid through the harness, then
    this file's table (``losses_<device>.md``) without regenerating the other results' summaries."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--case"]:
        print(json.dumps(run_case(json.loads(argv[1]))))
        return 0
    from benchmarks import run

    return run.run_one_config("losses", argv)


if __name__ == "__main__":
    sys.exit(main())
