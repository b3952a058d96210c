"""Overhead of the Python call over the C++ call: lingo.search top-k, timed from Python, against
the library call's own time (info["seconds"], what the CLI's --json reports as "seconds"; it
includes encoding the database, as bench/lingo/bench_lingo_search does). The issue's target: within
1.1x for 367k x 367k top-100 on an H100. What Python adds is argument conversion and turning the
hits into two NumPy arrays (36.7 M hits split on the call's threads into the arrays' memory) and
freeing the library's hit list.

    PYTHONPATH=build/cuda/python python3 bench/python/bench_lingo_search.py --data .deps/lingo
    PYTHONPATH=build/default/python python3 bench/python/bench_lingo_search.py --queries 2000   # smoke

Without molecules_367k.smi.gz (scripts/fetch-gpu-deps.sh puts it in .deps/lingo) it runs on the
bundled 4,096-molecule set.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import time
from pathlib import Path

import molaccel
from molaccel import lingo


def smiles_lines(path: Path, limit: int | None) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt") as f:
        for line in f:
            if line.strip():
                out.append(line.split()[0])
                if limit is not None and len(out) == limit:
                    break
    return out


def main() -> int:
    root = Path(__file__).resolve().parents[2]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(root / ".deps" / "lingo"), help="folder with molecules_367k.smi.gz")
    p.add_argument("--queries", type=int, default=None, help="first N molecules as queries (default: all)")
    p.add_argument("-k", type=int, default=100)
    p.add_argument("--device", default="auto")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    path = Path(args.data) / "molecules_367k.smi.gz"
    if not path.exists():
        path = root / "data" / "lingo" / "demo4096.smi"
    t0 = time.perf_counter()
    db = lingo.molecules(path)
    queries = db if args.queries is None else lingo.molecules(smiles_lines(path, args.queries))
    print(f"{path.name}: {len(db)} molecules read in {time.perf_counter() - t0:.2f} s; "
          f"{len(queries)} queries, k = {args.k}, device {args.device}")
    info: dict = {}
    lingo.search(queries, db, k=args.k, device=args.device, info=info)  # warm-up: contexts, uploads
    ratios, walls, calls = [], [], []
    result: lingo.SearchResult | None = None
    for _ in range(args.repeats):
        info = {}
        result = None  # the previous result is freed before the clock starts, not inside the call
        t = time.perf_counter()
        result = lingo.search(queries, db, k=args.k, device=args.device, info=info)
        wall = time.perf_counter() - t
        walls.append(wall)
        calls.append(info["seconds"])
        ratios.append(wall / info["seconds"])
    assert result is not None
    idx, sim = result
    print(f"backend {info['backend']}; result {idx.shape} ({idx.nbytes + sim.nbytes} bytes)")
    print(f"python call   median {statistics.median(walls):.4f} s")
    print(f"library call  median {statistics.median(calls):.4f} s")
    ratio = statistics.median(ratios)
    print(f"python / C++  median {ratio:.3f} (target <= 1.10) {'OK' if ratio <= 1.10 else 'ABOVE TARGET'}")
    print(f"molaccel {molaccel.__version__}, {molaccel.info()['cpu']['model']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
