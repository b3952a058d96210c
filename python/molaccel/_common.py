"""Helpers shared by the engine modules (not public)."""

from __future__ import annotations

import os
from typing import Any

def is_path(value: Any) -> bool:
    """A str or os.PathLike names a file; anything else is data."""
    return isinstance(value, (str, os.PathLike))


def check_device(device: str, threads: int) -> tuple[str, int]:
    if not isinstance(device, str):
        raise TypeError(f"device must be a str such as 'auto', 'cpu', 'gpu' or 'gpu:0,1' (got {device!r})")
    if not isinstance(threads, int) or isinstance(threads, bool):
        raise TypeError(f"threads must be an int (got {threads!r})")
    return device, threads
