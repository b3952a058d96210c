"""What the Python layer adds to molaccel's demo workloads: each call timed from Python (median of
at least --repeats calls, and of as many as 1 s takes, after a warm-up) against the time the
library reports for the same call, in the same run (what the CLI's --json reports: lingo
"seconds", orbital "seconds"; align: the whole search call, scoring and traceback). The issue's
target: within 5% of the CLI's compute time.

    PYTHONPATH=build/cuda/python python3 bench/python/bench_overhead.py [--device gpu] [--repeats 5]

With a GPU it also times the results left on the GPU (device_output=True) against the same call
returning NumPy arrays (both from Python; the "library" column is then the host call's library
time), so the two paths compare on one line each.

The linalg solve is left out: the library reports the iteration loop only (no set-up), so the
ratio would measure set-up, not Python.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Callable

import molaccel
from molaccel import align, lingo, orbital


def measure(call: Callable[[], float], repeats: int, min_seconds: float = 1.0) -> tuple[float, float]:
    """Medians of at least `repeats` calls and of as many as fit in `min_seconds` (at most 5000):
    a sub-millisecond call is timed thousands of times, so a few microseconds show."""
    call()  # warm-up: contexts, uploads, kernel compilation
    walls, inner = [], []
    start = time.perf_counter()
    while len(walls) < repeats or (time.perf_counter() - start < min_seconds and len(walls) < 5000):
        t = time.perf_counter()
        library_seconds = call()
        walls.append(time.perf_counter() - t)
        inner.append(library_seconds)
    return statistics.median(walls), statistics.median(inner)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    data = Path(__file__).resolve().parents[2] / "data"
    dev, n = args.device, args.repeats

    db = lingo.molecules(data / "lingo" / "demo4096.smi")
    queries = lingo.molecules([line.split()[0] for line in (data / "lingo" / "demo4096.smi").read_text().splitlines()[:5]])
    fasta_db = align.Database.from_fasta(data / "align" / "demo_db.fasta")
    fasta_q = align.read_fasta(data / "align" / "demo_queries.fasta")
    wfn = orbital.read(data / "orbital" / "threonine_631gs.molden")

    def lingo_search() -> float:
        info: dict = {}
        lingo.search(queries, db, k=5, device=dev, info=info)
        return info["seconds"]

    def lingo_cluster() -> float:
        info: dict = {}
        lingo.cluster(db, 0.7, device=dev, info=info)
        return info["seconds"]

    def align_search() -> float:
        info: dict = {}
        align.search(fasta_q, fasta_db, k=3, device=dev, info=info)
        return info["seconds"]

    def orbital_homo() -> float:
        return orbital.grid(wfn, "homo", spacing=0.1, padding=3.0, device=dev).seconds

    def orbital_density() -> float:
        return orbital.density(wfn, spacing=0.1, padding=3.0, device=dev).seconds

    def lingo_matrix() -> float:
        info: dict = {}
        lingo.matrix(db, device=dev, info=info)
        return info["seconds"]

    # device_output=True: the Python call's wall time against the host call's library time.
    host_library: dict[str, float] = {}

    def on_gpu(name: str, call: Callable[[], object]) -> Callable[[], float]:
        def timed() -> float:
            call()
            return host_library[name]

        return timed

    print(f"molaccel {molaccel.__version__}; device {dev}; median of at least {n} calls and of 1 s of calls")
    print(f"{'workload':34} {'python s':>10} {'library s':>10} {'overhead':>9}")
    worst = 0.0
    host = [
        ("lingo search 5 x 4096 top-5", lingo_search),
        ("lingo cluster 4096 at 0.7", lingo_cluster),
        ("lingo matrix 4096 x 4096", lingo_matrix),
        ("align search 3 x 400 top-3", align_search),
        ("orbital threonine HOMO 0.1 A", orbital_homo),
        ("orbital threonine density 0.1 A", orbital_density),
    ]
    for name, call in host:
        wall, inner = measure(call, n)
        host_library[name] = inner
        overhead = wall / inner - 1 if inner > 0 else float("nan")
        worst = max(worst, overhead)
        print(f"{name:34} {wall:10.5f} {inner:10.5f} {100 * overhead:8.1f}%")
    print(f"largest overhead {100 * worst:.1f}% (target <= 5%)")
    if molaccel.info()["gpus"] and dev != "cpu":
        print("device_output=True (library: the host call's)")
        on_device = {"device": dev, "device_output": True}
        for name, call in [
            ("lingo matrix 4096 x 4096", lambda: lingo.matrix(db, **on_device)),
            ("orbital threonine HOMO 0.1 A", lambda: orbital.grid(wfn, "homo", spacing=0.1, **on_device)),
            ("orbital threonine density 0.1 A", lambda: orbital.density(wfn, spacing=0.1, **on_device)),
        ]:
            wall, inner = measure(on_gpu(name, call), n)
            print(f"{name:34} {wall:10.5f} {inner:10.5f} {100 * (wall / inner - 1):8.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
