"""GPU against CPU through the Python package (CTest label gpu; exit 77, skipped, without a GPU):
lingo and align give the CPU's bits, orbital grids agree within fp32 rounding, solves converge in
every launch mode; linalg containers and results left on the GPU (device_output=True) hand their
memory to CuPy and PyTorch without a copy, on the consumers' streams."""

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


def test_pooled_result_memory_is_never_shared_by_live_arrays():
    _engine("orbital")
    import test_orbital

    test_orbital.test_results_alive_together_never_share_memory(device="gpu")
    lingo = _engine("lingo")
    db = lingo.molecules(DATA / "lingo" / "demo4096.smi")
    first, second = lingo.matrix(db, device="gpu"), lingo.matrix(db, device="gpu")
    assert not np.shares_memory(first, second) and np.array_equal(first, second)
    del first
    third = lingo.matrix(db, device="gpu")  # may reuse the freed block
    assert not np.shares_memory(second, third) and np.array_equal(second, third)


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
    for launch in ("auto", "graph", "generated"):
        r = linalg.solve(a, launch=launch, device="gpu")
        assert r.converged and r.backend.startswith("gpu"), launch
        assert np.allclose(r.x, 1.0, atol=1e-6)


def _frameworks():
    found = {}
    for name in ("cupy", "torch"):
        try:
            found[name] = __import__(name)
        except ImportError:
            pass
    return found


def _check_zero_copy(make, expected):
    """`make()` gives a fresh DeviceArray holding `expected`: CuPy and PyTorch take its memory (same
    pointer), on their default and on their own non-blocking streams, and keep it alive after the
    DeviceArray is gone."""
    a = make()
    ptr = a.pointer
    assert a.__cuda_array_interface__["data"] == (ptr, False) and a.__cuda_array_interface__["stream"] is None
    assert a.__dlpack_device__() == (2, a.device) and a.nbytes == expected.nbytes
    assert np.array_equal(a.to_numpy(), expected)
    with pytest.raises(ValueError):
        a.__dlpack__(stream=0)  # ambiguous in the DLPack protocol
    a.__dlpack__(stream=1)  # legacy default stream
    a.__dlpack__(stream=-1)  # no synchronisation asked
    fw = _frameworks()
    if "cupy" in fw:
        cupy = fw["cupy"]
        c = cupy.asarray(a)  # __cuda_array_interface__
        assert c.data.ptr == ptr and np.array_equal(cupy.asnumpy(c), expected)
        s = cupy.cuda.Stream(non_blocking=True)
        with s:  # CuPy passes its current stream to __dlpack__
            d = cupy.from_dlpack(a)
            twice = d * 2
        s.synchronize()
        assert d.data.ptr == ptr and np.array_equal(cupy.asnumpy(twice), expected * 2)
        kept = cupy.from_dlpack(make())  # the consumer alone keeps the memory alive
        assert np.array_equal(cupy.asnumpy(kept), expected)
    if "torch" in fw:
        torch = fw["torch"]
        t = torch.from_dlpack(a)
        assert t.is_cuda and t.data_ptr() == ptr and np.array_equal(t.cpu().numpy(), expected)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):  # PyTorch passes s.cuda_stream to __dlpack__
            u = torch.from_dlpack(a)
            twice = u * 2
        s.synchronize()
        assert u.data_ptr() == ptr and np.array_equal(twice.cpu().numpy(), expected * 2)
        a.__dlpack__(stream=s.cuda_stream)
        kept = torch.from_dlpack(make())
        assert np.array_equal(kept.cpu().numpy(), expected)


def test_lingo_matrix_left_on_the_gpu():
    lingo = _engine("lingo")
    db = lingo.molecules(DATA / "lingo" / "demo4096.smi")
    lines = (DATA / "lingo" / "demo4096.smi").read_text().splitlines()
    queries = lingo.molecules([line.split()[0] for line in lines[:300]])
    for metric in ("tanimoto", "set"):
        host = lingo.matrix(db, metric=metric, device="cpu")
        info = {}
        m = lingo.matrix(db, metric=metric, device="gpu", device_output=True, info=info)
        assert isinstance(m, molaccel.DeviceArray) and m.shape == host.shape and m.dtype == "float32"
        assert info["backend"] == "cuda:0" and info["pairs"] == host.size
        assert np.array_equal(m.to_numpy(), host), metric  # the same bits as the host matrix
    rect = lingo.matrix(queries, db, device="gpu", device_output=True)
    assert np.array_equal(rect.to_numpy(), lingo.matrix(queries, db, device="cpu"))
    host = lingo.matrix(queries, db, device="cpu")
    _check_zero_copy(lambda: lingo.matrix(queries, db, device="gpu", device_output=True), host)
    with pytest.raises(ValueError):
        lingo.matrix(db, device="gpu", device_output=True, output_type="fp16")
    with pytest.raises(molaccel.InputError):
        lingo.matrix(db, device="gpu", device_output=True, backend="cpu")


def test_orbital_grids_left_on_the_gpu():
    orbital = _engine("orbital")
    wfn = orbital.read(DATA / "orbital" / "threonine_631gs.molden")
    cpu = orbital.grid(wfn, ["homo", "lumo"], spacing=0.2, device="cpu")
    scale = 1e-5 * float(np.max(np.abs(cpu.values)))  # as test_orbital_grids_agree_with_the_cpu
    for backend in ("auto", "cuda-jit", "cuda-generic"):
        g = orbital.grid(wfn, ["homo", "lumo"], like=cpu, backend=backend, device="gpu", device_output=True)
        assert isinstance(g.values, molaccel.DeviceArray) and g.values.shape == cpu.values.shape
        assert np.max(np.abs(g.values.to_numpy() - cpu.values)) < scale, backend
    one = orbital.grid(wfn, "homo", like=cpu, device="gpu", device_output=True)
    assert one.values.shape == cpu.counts
    host_gpu = orbital.grid(wfn, "homo", like=cpu, device="gpu")
    assert np.max(np.abs(one.values.to_numpy() - host_gpu.values)) < scale
    dcpu = orbital.density(wfn, like=cpu, device="cpu")
    d = orbital.density(wfn, like=cpu, device="gpu", device_output=True)
    assert d.values.shape == cpu.counts
    assert np.max(np.abs(d.values.to_numpy() - dcpu.values)) < 1e-5 * float(np.max(dcpu.values))
    # The kept device state follows the wavefunction, orbitals and kind asked for.
    water = orbital.read(DATA / "orbital" / "h2o_631gs.molden")
    water_cpu = orbital.grid(water, "homo", spacing=0.2, device="cpu")
    water_rho = orbital.density(water, like=water_cpu, device="cpu")
    for _ in range(2):
        for w, ref, kind in ((water, water_cpu, "homo"), (wfn, cpu, "homo"), (water, water_rho, "density"),
                             (wfn, dcpu, "density"), (wfn, cpu, "lumo")):
            want = ref.values[1 if kind == "lumo" else 0] if ref.values.ndim == 4 else ref.values
            if kind == "density":
                got = orbital.density(w, like=ref, device="gpu", device_output=True).values.to_numpy()
            else:
                got = orbital.grid(w, kind, like=ref, device="gpu", device_output=True).values.to_numpy()
            assert np.max(np.abs(got - want)) < 1e-5 * float(np.max(np.abs(want))), kind
    expected = one.values.to_numpy()
    _check_zero_copy(lambda: orbital.grid(wfn, "homo", like=cpu, device="gpu", device_output=True).values, expected)
    with pytest.raises(molaccel.InputError):
        orbital.grid(wfn, "homo", like=cpu, device="gpu", device_output=True, backend="cpu")
    with pytest.raises(TypeError):
        orbital.write_cube("never.cube", wfn, one)


def test_linalg_containers_take_the_consumers_stream_argument():
    linalg = _engine("linalg")
    x = linalg.Vector(np.arange(1 << 16, dtype=np.float64), device="gpu")
    with pytest.raises(ValueError):
        x.__dlpack__(stream=0)
    x.__dlpack__(stream=2)  # per-thread default stream
    assert x.__cuda_array_interface__["stream"] is None
