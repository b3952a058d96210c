"""The package as a whole: import, info(), errors, device selection, docstrings."""

from __future__ import annotations

import inspect

import pytest

import molaccel


def test_info_describes_the_build():
    d = molaccel.info()
    for key in ("version", "cuda", "cpu", "gpus", "gpu_absence_reason", "engines", "nvrtc"):
        assert key in d
    assert d["version"] == molaccel.__version__
    assert d["cpu"]["logical_cores"] >= 1
    if not d["gpus"]:
        assert d["gpu_absence_reason"]


def test_input_error_is_a_value_error_with_path_and_line():
    assert issubclass(molaccel.InputError, ValueError)
    assert issubclass(molaccel.InputError, molaccel.Error)
    assert issubclass(molaccel.NotCompiled, molaccel.Error)


def test_bad_device_text_is_an_input_error():
    with pytest.raises(molaccel.InputError) as e:
        molaccel.lingo.search(["CCO"], ["CCO"], device="tpu")
    assert e.value.path == "--device"


def test_gpu_without_one_says_so():
    if molaccel.info()["gpus"]:
        pytest.skip("this machine has a GPU")
    with pytest.raises((molaccel.NotCompiled, molaccel.DeviceUnavailable)):
        molaccel.lingo.search(["CCO"], ["CCO"], device="gpu")


def test_every_public_function_has_a_docstring_with_an_example():
    modules = [getattr(molaccel, name) for name in molaccel.info()["engines"]]
    checked = 0
    for module in [molaccel, *modules]:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or (inspect.isclass(obj) and obj.__module__.startswith("molaccel")):
                if inspect.isfunction(obj):
                    assert obj.__doc__ and "Example" in obj.__doc__, f"{module.__name__}.{name}"
                    checked += 1
    assert checked >= 2 + 3 * len(modules)


def test_log_level_is_checked():
    molaccel.set_log_level("warn")
    with pytest.raises(ValueError):
        molaccel.set_log_level("loud")
