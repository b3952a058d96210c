"""Runs one test file: with pytest when it is installed, else with this small runner, which
calls every ``test_*`` function (giving ``tmp_path`` a fresh directory) and supports the parts of
pytest the suites use (``pytest.raises``, ``pytest.skip``). Exit status: 0 all passed, 1 a test
failed, 77 (CTest's skip) the package is not importable here, or ``--needs-gpu`` was given and
molaccel sees no GPU.

    python runner.py [--needs-gpu] TEST_FILE
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import tempfile
import traceback
import types
from pathlib import Path


def _install_pytest_stub() -> None:
    stub = types.ModuleType("pytest")

    class Skipped(Exception):
        pass

    class _Raises:
        def __init__(self, expected, match=None):
            self.expected, self.match, self.value = expected, match, None

        def __enter__(self):
            return self

        def __exit__(self, kind, value, tb):
            if kind is None:
                raise AssertionError(f"DID NOT RAISE {self.expected}")
            if not issubclass(kind, self.expected):
                return False
            if self.match is not None and not re.search(self.match, str(value)):
                raise AssertionError(f"{value!r} does not match {self.match!r}")
            self.value = value
            return True

    def skip(reason=""):
        raise Skipped(reason)

    stub.raises = lambda expected, match=None: _Raises(expected, match)
    stub.skip = skip
    stub.Skipped = Skipped
    sys.modules["pytest"] = stub


def main() -> int:
    args = sys.argv[1:]
    needs_gpu = "--needs-gpu" in args
    path = Path([a for a in args if a != "--needs-gpu"][0])
    try:
        import molaccel
    except ImportError as e:
        print(f"molaccel is not importable ({e}): skipped")
        return 77
    if needs_gpu and not molaccel.info()["gpus"]:
        print(f"no GPU ({molaccel.info()['gpu_absence_reason']}): skipped")
        return 77
    try:
        import pytest

        return pytest.main(["-q", "-p", "no:cacheprovider", str(path)])
    except ImportError:
        pass
    _install_pytest_stub()
    import pytest  # the stub

    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    passed = failed = skipped = 0
    for name, fn in inspect.getmembers(module, inspect.isfunction):
        if not name.startswith("test_") or fn.__module__ != module.__name__:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            kwargs = {"tmp_path": Path(tmp)} if "tmp_path" in inspect.signature(fn).parameters else {}
            try:
                fn(**kwargs)
                passed += 1
            except pytest.Skipped as e:
                skipped += 1
                print(f"SKIPPED {name}: {e}")
            except Exception:
                failed += 1
                print(f"FAILED {name}")
                traceback.print_exc()
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
