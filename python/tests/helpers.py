"""Shared by the Python test suites: the CLI built beside the package and the bundled data."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

SOURCE_DIR = Path(os.environ.get("MOLACCEL_SOURCE_DIR", Path(__file__).resolve().parents[2]))
DATA = SOURCE_DIR / "data"
THREADS = 2  # the CLI and Python use the same thread count, so CPU reductions add in the same order


def cli(*args: object) -> subprocess.CompletedProcess:
    """Runs the molaccel CLI of this build (MOLACCEL_CLI) on the CPU, quietly; fails on error."""
    exe = os.environ.get("MOLACCEL_CLI")
    if not exe:
        import pytest

        pytest.skip("MOLACCEL_CLI is not set (run the suites through ctest)")
    cmd = [exe, "-q", *[str(a) for a in args]]
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


def read_tsv(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = Path(path).read_text().splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]


def head_file(src: Path, dst: Path, n: int) -> Path:
    with open(src) as f:
        lines = [next(f) for _ in range(n)]
    dst.write_text("".join(lines))
    return dst


def run_in_threads(work: Callable[[int], Any], n: int) -> list[Any]:
    """work(0) ... work(n - 1) on n threads at once; their results in order. Fails (assert) when
    any call raised."""
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = work(i)
        except Exception as e:  # pragma: no cover - reported by the caller's assert
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results
