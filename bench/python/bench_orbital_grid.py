"""What the Python layer adds to an orbital grid call: `molaccel demo`'s threonine HOMO (6-31G*,
0.1 A spacing, 3 A padding) from Python against the same call from C++ (bench_orbital_grid, built
beside the package: evaluate_orbitals_into on one Resources handle into a block of its pinned pool,
as the Python call's result memory is) and against the library's own time (Grid.seconds, what the
CLI's --json reports as "seconds"). The issue's target: the Python call within 5% of the library's
compute time. A second row runs a 3 x 3 x 3 grid, where the call is all fixed cost.

    PYTHONPATH=build/cuda/python python3 bench/python/bench_orbital_grid.py [--device gpu] [--repeats 2000]

Each row alternates rounds of Python calls and of the C++ program (--rounds), each round the median
of --repeats calls after a warm-up; the table gives the medians over rounds. "outside" is the
median per call of wall time minus the library's time: what a call costs around the timed
evaluation (argument conversion, result memory and array, the wrapper objects; in C++ only the
request checks). Without the C++ program (--cxx, default: <build>/bench/python/bench_orbital_grid
next to the package's build tree) only the Python rows are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

import molaccel
from molaccel import orbital


def python_round(wfn: Any, kwargs: dict[str, Any], repeats: int) -> dict[str, float]:
    """Median wall, library and outside times of `repeats` orbital.grid calls (after a warm-up).
    Each result is freed inside its timing, as the C++ loop gives its block back inside its own."""
    for _ in range(min(repeats, 20)):
        orbital.grid(wfn, "homo", **kwargs)
    walls, library, outside = [], [], []
    clock = time.perf_counter
    for _ in range(repeats):
        t = clock()
        g = orbital.grid(wfn, "homo", **kwargs)
        seconds = g.seconds
        del g
        wall = clock() - t
        walls.append(wall)
        library.append(seconds)
        outside.append(wall - seconds)
    return {"wall": statistics.median(walls), "library": statistics.median(library),
            "outside": statistics.median(outside)}


def cxx_round(program: Path, molden: Path, args: list[str], repeats: int) -> dict[str, Any]:
    out = subprocess.run([str(program), str(molden), *args, "--repeats", str(repeats)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def median_of(rounds: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--repeats", type=int, default=1000, help="calls per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cxx", default=None, help="the bench_orbital_grid program")
    args = p.parse_args()
    root = Path(__file__).resolve().parents[2]
    molden = root / "data" / "orbital" / "threonine_631gs.molden"
    # The package in a build tree sits in <build>/python/molaccel; the program in <build>/bench/python.
    default_cxx = Path(molaccel.__file__).resolve().parents[2] / "bench" / "python" / "bench_orbital_grid"
    program: Optional[Path] = Path(args.cxx) if args.cxx else default_cxx
    if not program.exists():
        print(f"no C++ program at {program} (build the bench_orbital_grid target, or give --cxx): Python rows only")
        program = None

    wfn = orbital.read(molden)
    common = ["--device", args.device, "--threads", str(args.threads)]
    rows = [
        ("threonine HOMO 0.1 A (demo)", {"spacing": 0.1, "padding": 3.0}, ["--spacing", "0.1", "--padding", "3.0"]),
        ("3 x 3 x 3 grid (fixed cost)", {"like": orbital._orbital.explicit_grid([0, 0, 0], [0.2, 0.2, 0.2], 0.1)},
         ["--box", "0.2", "--spacing", "0.1"]),
    ]
    first = orbital.grid(wfn, "homo", spacing=0.1, device=args.device, threads=args.threads)
    print(f"molaccel {molaccel.__version__}; threonine 6-31G*, {wfn.function_count} functions; HOMO on "
          f"{first.backend}, grid {first.counts}; device {args.device}; {molaccel.info()['cpu']['model']}")
    print(f"{args.rounds} rounds of {args.repeats} calls; times per call, medians (microseconds)")
    print(f"{'workload':30} {'python':>10} {'library':>10} {'py/lib':>8} {'py out':>8} {'C++':>10} "
          f"{'C++ out':>8} {'py/C++':>8}")
    verdict = None
    for name, kwargs, cxx_args in rows:
        kwargs = {**kwargs, "device": args.device, "threads": args.threads}
        py, cxx = [], []
        for _ in range(args.rounds):
            py.append(python_round(wfn, kwargs, args.repeats))
            if program is not None:
                cxx.append(cxx_round(program, molden, cxx_args + common, args.repeats))
        wall, library, outside = (median_of(py, k) for k in ("wall", "library", "outside"))
        line = f"{name:30} {wall * 1e6:10.1f} {library * 1e6:10.1f} {wall / library:8.3f} {outside * 1e6:8.2f}"
        if cxx:
            cxx_wall, cxx_outside = median_of(cxx, "wall"), median_of(cxx, "outside")
            line += f" {cxx_wall * 1e6:10.1f} {cxx_outside * 1e6:8.2f} {wall / cxx_wall:8.3f}"
        print(line)
        if verdict is None:
            verdict = wall / library
    assert verdict is not None
    print(f"threonine HOMO: Python call / library time = {verdict:.3f} (target <= 1.05) "
          f"{'OK' if verdict <= 1.05 else 'ABOVE TARGET'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
