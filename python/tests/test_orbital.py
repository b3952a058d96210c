"""molaccel.orbital against the CLI: byte-identical cube files, wavefunction contents, errors."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

import molaccel
from molaccel import orbital

from helpers import DATA, THREADS, cli, run_in_threads

WATER = DATA / "orbital" / "h2o_631gs.molden"


def test_orbital_cube_is_byte_identical_to_the_cli(tmp_path):
    cli("orbital", "grid", WATER, "--orbital", "homo", "--spacing", 0.2, "-o", tmp_path / "cli.cube",
        "--device", "cpu", "--threads", THREADS)
    wfn = orbital.read(WATER)
    g = orbital.grid(wfn, "homo", spacing=0.2, device="cpu", threads=THREADS)
    assert g.values.shape == g.counts and g.values.dtype == np.float32
    orbital.write_cube(tmp_path / "py.cube", wfn, g, description="orbital " + wfn.describe_orbital("homo"))
    assert (tmp_path / "py.cube").read_bytes() == (tmp_path / "cli.cube").read_bytes()


def test_density_cube_is_byte_identical_to_the_cli(tmp_path):
    cli("orbital", "grid", WATER, "--density", "total", "--spacing", 0.25, "--padding", 2, "-o",
        tmp_path / "cli.cube", "--device", "cpu", "--threads", THREADS)
    wfn = orbital.read(WATER)
    g = orbital.density(wfn, "total", spacing=0.25, padding=2, device="cpu", threads=THREADS)
    orbital.write_cube(tmp_path / "py.cube", wfn, g, description="total electron density [e/bohr^3]")
    assert (tmp_path / "py.cube").read_bytes() == (tmp_path / "cli.cube").read_bytes()


def test_grid_layout_is_the_cube_order():
    wfn = orbital.read(WATER)
    g = orbital.grid(wfn, ["homo", "lumo", "1"], spacing=0.3, device="cpu")
    assert g.values.shape == (3, *g.counts)
    one = orbital.grid(wfn, "lumo", like=g, device="cpu")
    # One orbital and several take different CPU kernels: fp32 rounding apart, not bits.
    assert np.allclose(one.values, g.values[1], rtol=1e-5, atol=1e-6)
    # Point (i, j, k) sits at origin + i a0 + j a1 + k a2: the box encloses the atoms.
    far = g.origin + (np.array(g.counts) - 1) @ g.axes
    pos = wfn.atoms["positions"]
    assert (pos > g.origin).all() and (pos < far).all()


def test_grid_like_a_cube_file_matches_the_reference_cube():
    # The bundled cube was written by another program on its own grid; our values on that grid
    # agree to the cube's printed precision (5 significant digits) and the screening bound.
    like = DATA / "orbital" / "h2o_Psi_a_5_5-A.cube.gz"
    g = orbital.grid(WATER, "5", like=like, device="cpu")
    with gzip.open(like, "rt") as f:
        lines = f.read().splitlines()
    natoms = abs(int(lines[2].split()[0]))
    values = np.array(" ".join(lines[6 + natoms:]).split(), dtype=np.float64)
    # The sign of an orbital is arbitrary: compare up to sign.
    v = g.values.reshape(-1).astype(np.float64)
    sign = np.sign(np.dot(v, values))
    assert np.max(np.abs(sign * v - values)) < 1e-4


def test_wavefunction_contents():
    wfn = orbital.read(WATER)
    assert wfn.format == "molden" and wfn.function_count == 18 and not wfn.unrestricted
    assert wfn.atoms["atomic_numbers"].tolist() == [8, 1, 1]
    assert wfn.alpha["coefficients"].shape == (len(wfn.alpha["energies"]), 18)
    assert wfn.orbital_index("homo") == ("alpha", 4)
    assert wfn.alpha["occupations"][4] > 0 and wfn.alpha["occupations"][5] == 0


def test_backends_agree():
    wfn = orbital.read(WATER)
    ref = orbital.grid(wfn, "homo", spacing=0.3, backend="reference", device="cpu").values
    cpu = orbital.grid(wfn, "homo", spacing=0.3, backend="cpu", device="cpu").values
    # fp32 evaluation with screening 1e-9 against the double-precision oracle.
    assert np.max(np.abs(cpu - ref)) < 1e-5 * max(1.0, float(np.max(np.abs(ref))))


def test_bad_inputs(tmp_path):
    truncated = tmp_path / "t.molden"
    truncated.write_text("\n".join(WATER.read_text().splitlines()[:12]) + "\n")
    with pytest.raises(molaccel.InputError) as e:
        orbital.read(truncated)
    assert e.value.path == str(truncated)
    with pytest.raises(molaccel.InputError):
        orbital.grid(WATER, "homo-99")
    with pytest.raises(molaccel.InputError):
        orbital.grid(WATER, "homo", backend="quantum")
    with pytest.raises(molaccel.InputError):
        orbital.density(WATER, "up")
    with pytest.raises(molaccel.InputError):
        orbital.grid(WATER, "homo", screening=-1)
    with pytest.raises(ValueError):
        orbital.grid(WATER, "homo", origin=(0, 0, 0))
    with pytest.raises(molaccel.InputError):
        orbital.read(tmp_path / "missing.molden")


def test_threads_calling_in_parallel_get_the_same_results():
    wfn = orbital.read(WATER)
    want = orbital.grid(wfn, "homo", spacing=0.25, device="cpu").values
    results = run_in_threads(lambda i: orbital.grid(wfn, "homo", spacing=0.25, device="cpu", threads=1 + i % 2).values, 4)
    for r in results:
        assert np.array_equal(r, want)


def test_first_requests_from_parallel_threads_share_their_handles():
    # Thread counts no call has asked for yet: the threads create their Resources handles at the
    # same time (one per distinct request, found again by later calls).
    wfn = orbital.read(WATER)
    want = orbital.grid(wfn, "homo", spacing=0.3, device="cpu").values
    results = run_in_threads(lambda i: orbital.grid(wfn, "homo", spacing=0.3, device="cpu", threads=5 + i % 3).values, 6)
    results += run_in_threads(lambda i: orbital.grid(wfn, "homo", spacing=0.3, device="cpu", threads=5 + i % 3).values, 3)
    for r in results:
        assert np.array_equal(r, want)


def test_bad_device_arguments_are_refused_on_every_call():
    wfn = orbital.read(WATER)
    orbital.grid(wfn, "homo", spacing=0.4, device="cpu", threads=1)
    for _ in range(2):  # a request refused once is not remembered as a handle
        with pytest.raises(molaccel.InputError):
            orbital.grid(wfn, "homo", spacing=0.4, device="cpu", threads=-1)
        with pytest.raises(molaccel.InputError):
            orbital.grid(wfn, "homo", spacing=0.4, device="tpu")


def test_orbital_names_resolve_against_the_wavefunction_given():
    # Grid calls remember the names they resolved; a wavefunction read after another was freed
    # (perhaps at its address) must get its own answer: water's HOMO is orbital 5, N2's is 7.
    names = ["homo", "lumo", "homo-1"]
    for _ in range(3):
        for path in (WATER, DATA / "orbital" / "n2_ccpvtz.molden"):
            wfn = orbital.read(path)
            indices = [str(wfn.orbital_index(name)[1] + 1) for name in names]  # 1-based, uncached
            g = orbital.grid(wfn, names, spacing=0.4, device="cpu")
            assert np.array_equal(g.values, orbital.grid(wfn, indices, like=g, device="cpu").values)
            del wfn, g


def test_grid_is_read_only():
    wfn = orbital.read(WATER)
    g = orbital.grid(wfn, ["homo"], spacing=0.3, device="cpu")
    assert g.values.shape == g.counts  # one orbital, even in a list: no leading axis
    for name in ("values", "origin", "axes", "backend", "seconds", "spec"):
        with pytest.raises(AttributeError):
            setattr(g, name, None)
    assert g.origin is g.origin and not g.origin.flags.writeable and not g.axes.flags.writeable
    assert np.allclose(g.origin, g.spec.origin) and np.allclose(g.axes, g.spec.axes)
    assert repr(g).startswith(f"Grid(shape={g.counts}, backend=")


def test_results_alive_together_never_share_memory(device="cpu"):
    # Result memory is reused from the Resources' pool once an array is freed; arrays alive at the
    # same time must each keep their own (test_gpu.py runs this on the GPU).
    wfn = orbital.read(WATER)
    grids = [orbital.grid(wfn, "homo", spacing=0.3, device=device) for _ in range(3)]
    grids.append(orbital.density(wfn, spacing=0.3, device=device))
    for i, a in enumerate(grids):
        assert a.values.flags.c_contiguous and a.values.flags.writeable
        for b in grids[i + 1:]:
            assert not np.shares_memory(a.values, b.values)
    def same(a, b):
        # Bit for bit where the same kernels ran. On a GPU the generic kernel computes while a new
        # basis set's JIT kernel compiles (docs/orbital.md), so calls may differ in kernel: then
        # the documented fp32 tolerance, 2e-5 of the largest value.
        if a.backend == b.backend:
            return np.array_equal(a.values, b.values)
        return np.allclose(a.values, b.values, rtol=0, atol=2e-5 * np.abs(b.values).max())

    assert all(same(grids[0], g) for g in grids[1:3])
    first = grids[0]
    kept = first.values.copy()
    del grids
    again = orbital.grid(wfn, "homo", spacing=0.3, device=device)  # may reuse a freed block
    assert np.array_equal(first.values, kept)  # the live array was not overwritten
    assert same(again, first)


def test_device_output_needs_a_gpu():
    if molaccel.info()["gpus"]:
        pytest.skip("this machine has a GPU (test_gpu.py covers device_output)")
    wfn = orbital.read(WATER)
    for call in (orbital.grid, orbital.density):
        with pytest.raises((molaccel.DeviceUnavailable, molaccel.NotCompiled)) as e:
            call(wfn, spacing=0.3, device_output=True)
        assert isinstance(e.value, RuntimeError) and "device_output=True" in str(e.value)
