"""GPU against CPU through the Python package (CTest label gpu; exit 77, skipped, without a GPU):
lingo and align give the CPU's bits, orbital grids agree within fp32 rounding, solves converge in
every launch mode, and linalg containers hand their memory to CuPy and PyTorch without a copy."""

from __future__ import annotations

import numpy as np
import pytest

import molaccel

from helpers import DATA

ENGINES = molaccel.info()["engines"]


def _engine(name):
    if name not in ENGINES:
        pytest.skip(f"{name} is not built")
    return getattr(molaccel, name)


def test_lingo_gives_the_cpu_bits():
    lingo = _engine("lingo")
    db = lingo.molecules(DATA / "lingo" / "demo4096.smi")
    for metric in ("tanimoto", "vidal", "set"):
        gpu = lingo.search(db, db, k=20, metric=metric, device="gpu")
        cpu = lingo.search(db, db, k=20, metric=metric, device="cpu")
        assert np.array_equal(gpu.indices, cpu.indices) and np.array_equal(gpu.similarities, cpu.similarities)
    info = {}
    m = lingo.matrix(db, device="gpu", info=info)
    assert info["backend"].startswith("cuda") and np.array_equal(m, lingo.matrix(db, device="cpu"))
    for t in ("fp16", "u8"):
        assert np.array_equal(lingo.matrix(db, output_type=t, device="gpu"), lingo.matrix(db, output_type=t, device="cpu"))


def test_align_gives_the_cpu_hits():
    align = _engine("align")
    queries, db = DATA / "align" / "demo_queries.fasta", align.Database.from_fasta(DATA / "align" / "demo_db.fasta")
    gpu = align.search(queries, db, k=10, device="gpu", backend="cuda")
    assert np.array_equal(gpu, align.search(queries, db, k=10, device="cpu"))


def test_orbital_grids_agree_with_the_cpu():
    orbital = _engine("orbital")
    wfn = orbital.read(DATA / "orbital" / "threonine_631gs.molden")
    cpu = orbital.grid(wfn, ["homo", "lumo"], spacing=0.2, device="cpu")
    for backend in ("cuda-jit", "cuda-generic"):
        gpu = orbital.grid(wfn, ["homo", "lumo"], like=cpu, backend=backend, device="gpu")
        assert gpu.backend.startswith("cuda")
        # fp32 on both sides, different summation orders: a few ulps of the largest value.
        assert np.max(np.abs(gpu.values - cpu.values)) < 1e-5 * float(np.max(np.abs(cpu.values)))


def test_linalg_containers_hand_memory_to_cupy_and_torch():
    linalg = _engine("linalg")
    rng = np.random.default_rng(7)
    x0, y0 = rng.uniform(-1, 1, 1 << 20), rng.uniform(-1, 1, 1 << 20)
    x, y = linalg.Vector(x0, device="gpu"), linalg.Vector(y0, device="gpu")
    x += 3.0 * y
    assert x.device == "gpu:0" and x.__dlpack_device__() == (2, 0)
    want = x0 + 3.0 * y0
    assert np.allclose(x.to_numpy(), want, rtol=1e-14)
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        c = cupy.asarray(x)  # __cuda_array_interface__: no copy
        assert c.data.ptr == x.__cuda_array_interface__["data"][0]
        d = cupy.from_dlpack(x)
        assert d.data.ptr == c.data.ptr
        assert np.allclose(cupy.asnumpy(d), want, rtol=1e-14)
        c *= 2  # CuPy writes molaccel's memory
        cupy.cuda.get_current_stream().synchronize()
        assert np.allclose(x.to_numpy(), 2 * want, rtol=1e-14)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t = torch.from_dlpack(x)
        assert t.is_cuda and t.data_ptr() == x.__cuda_array_interface__["data"][0]
        assert np.allclose(t.cpu().numpy(), x.to_numpy())


def test_linalg_solves_converge_in_every_launch_mode():
    linalg = _engine("linalg")
    a = linalg.poisson_2d(64)
    for launch in ("auto", "graph", "resident", "fused"):
        r = linalg.solve(a, launch=launch, device="gpu")
        assert r.converged and r.backend.startswith("gpu"), launch
        assert np.allclose(r.x, 1.0, atol=1e-6)
