"""Every example in the package's docstrings runs and prints what it shows (STYLE: examples that
compile). They run in a scratch directory where data/ is the repository's bundled data."""

from __future__ import annotations

import doctest
import os

import molaccel

from helpers import DATA


def test_docstring_examples(tmp_path):
    (tmp_path / "data").symlink_to(DATA, target_is_directory=True)
    modules = [molaccel, molaccel._errors]
    modules += [getattr(molaccel, name) for name in molaccel.info()["engines"]]
    if "linalg" in molaccel.info()["engines"]:
        modules.append(molaccel._expressions)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        attempted = 0
        for module in modules:
            result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
            assert result.failed == 0, module.__name__
            attempted += result.attempted
    finally:
        os.chdir(cwd)
    assert attempted >= 5 * len(modules)
