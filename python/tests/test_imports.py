"""molaccel beside pandas and pyarrow, imported in either order, and the extension's symbol table.

A CUDA build on the GPU machine aborted with "free(): invalid pointer" when molaccel._core was
imported before pandas or pyarrow (and worked the other way round). The extension now exports only
PyInit__core (python/src/core.version), so nothing it links can be bound by another library in the
process. Each order runs in a fresh interpreter (a crash would take this one with it); a test whose
library is not installed is skipped.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

import molaccel


def _run(code: str) -> None:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"python -c {code!r} exited {r.returncode}:\n{r.stdout}{r.stderr}"


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")


def test_molaccel_then_pandas():
    _needs("pandas")
    _run("import molaccel; import pandas; pandas.Series(['CCO']).to_numpy()")


def test_core_then_pyarrow():
    _needs("pyarrow")
    _run("import molaccel._core; import pyarrow, pyarrow.compute; pyarrow.array(['CCO'])")


def test_molaccel_then_pyarrow_and_pandas_then_a_call():
    _needs("pandas")
    _needs("pyarrow")
    _run(
        "import molaccel, pyarrow, pandas as pd\n"
        "if 'lingo' in molaccel.info()['engines']:\n"
        "    from molaccel import lingo\n"
        "    s = pd.Series(['CCO', 'CCN'], dtype='string[pyarrow]')\n"
        "    assert lingo.matrix(list(s), q=2, device='cpu').shape == (2, 2)\n"
    )


def test_pandas_then_molaccel():
    _needs("pandas")
    _run("import pandas; import molaccel")


def test_the_extension_exports_only_its_init():
    if not sys.platform.startswith("linux"):
        pytest.skip("the export list is set for Linux (ELF) only")
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    path = molaccel._core.__file__
    out = subprocess.run([nm, "-D", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    names = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
    assert names == ["PyInit__core"], f"{path} exports {len(names)} symbols, e.g. {names[:10]}"


def test_no_other_library_binds_to_the_extension(tmp_path):
    # What went wrong before the export list: libstdc++.so.6 and libfmt.so.9, loaded by the
    # extension (the root of their lookup scope), bound their own std::string and fmt references to
    # the extension's copies, so with molaccel imported first every later user of libstdc++
    # (pyarrow) ran molaccel's instances. glibc's loader reports each binding under LD_DEBUG.
    if not sys.platform.startswith("linux"):
        pytest.skip("LD_DEBUG is glibc's")
    log = tmp_path / "ld"
    code = "import molaccel._core\ntry:\n    import pyarrow, pandas\nexcept ImportError:\n    pass\n"
    env = dict(os.environ, LD_DEBUG="bindings", LD_DEBUG_OUTPUT=str(log))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    core = os.path.realpath(molaccel._core.__file__)
    lines = [line for f in tmp_path.glob("ld.*") for line in f.read_text(errors="replace").splitlines()]
    if not any("binding file" in line for line in lines):
        pytest.skip("the dynamic loader wrote no LD_DEBUG log (not glibc?)")
    into_core = []
    for line in lines:
        m = re.search(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: \w+ symbol `([^']+)'", line)
        if m and os.path.realpath(m.group(2)) == core and os.path.realpath(m.group(1)) != core:
            if m.group(3) != "PyInit__core":
                into_core.append(f"{m.group(1)}: {m.group(3)}")
    assert not into_core, "bound to molaccel._core:\n" + "\n".join(sorted(set(into_core))[:20])
