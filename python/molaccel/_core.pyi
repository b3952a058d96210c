# Type stub of the compiled extension molaccel._core (python/src/*.cpp). The public API is typed
# in the package's .py files (py.typed); this stub tells type checkers what the private extension
# is, so they can check those files. Its engine submodules are untyped on purpose: only the .py
# modules call them, and their annotations are the ones users see.
from typing import Any

lingo: Any
align: Any
orbital: Any
linalg: Any

def info() -> dict[str, Any]: ...
def resources_describe(device: str, threads: int, /) -> str: ...
def set_log_level(level: int, /) -> None: ...
def log_level() -> int: ...
