"""molaccel.lingo against the CLI (the same library calls): same bits, inputs, errors, threads."""

from __future__ import annotations


import numpy as np
import pytest

import molaccel
from molaccel import lingo

from helpers import DATA, THREADS, cli, head_file, read_tsv, run_in_threads

DB = DATA / "lingo" / "demo4096.smi"


def test_search_matches_the_cli(tmp_path):
    queries = head_file(DATA / "lingo" / "nci_first5k.smi", tmp_path / "q.smi", 40)
    cli("lingo", "search", queries, DB, "-k", 7, "-o", tmp_path / "hits.tsv", "--device", "cpu", "--threads", THREADS)
    header, rows = read_tsv(tmp_path / "hits.tsv")
    assert header == ["query", "target", "similarity", "rank"]
    qs, db = lingo.molecules(queries), lingo.molecules(DB)
    idx, sim = lingo.search(qs, db, k=7, device="cpu", threads=THREADS)
    assert idx.shape == sim.shape == (40, 7) and sim.dtype == np.float32
    got = [(qs.names[i], db.names[idx[i, r]], sim[i, r], r + 1) for i in range(40) for r in range(7)]
    want = [(q, t, np.float32(s), int(rank)) for q, t, s, rank in rows]
    assert got == want  # similarities bit-equal: the TSV prints the shortest exact form


def test_matrix_matches_the_cli_npy(tmp_path):
    mols = head_file(DB, tmp_path / "m.smi", 150)
    for output_type in ("fp32", "fp16", "u8"):
        out = tmp_path / f"m_{output_type}.npy"
        cli("lingo", "matrix", mols, "-o", out, "--output-type", output_type, "--device", "cpu")
        want = np.load(out)
        got = lingo.matrix(mols, output_type=output_type, device="cpu")
        assert got.dtype == want.dtype and got.shape == want.shape == (150, 150)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), output_type


def test_matrix_with_database_matches_search():
    qs = lingo.molecules(DB)
    sub = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1"]
    m = lingo.matrix(sub, qs, device="cpu")
    idx, sim = lingo.search(sub, qs, k=3, device="cpu")
    for i in range(3):
        assert np.array_equal(m[i, idx[i]], sim[i])
        assert sim[i, 0] == m[i].max()


def test_neighbors_and_cluster_match_the_cli(tmp_path):
    mols = head_file(DB, tmp_path / "m.smi", 600)
    cli("lingo", "neighbors", mols, "--threshold", 0.6, "-o", tmp_path / "n.tsv", "--device", "cpu")
    cli("lingo", "cluster", mols, "--threshold", 0.6, "-o", tmp_path / "c.tsv", "--device", "cpu")
    db = lingo.molecules(mols)
    pairs = lingo.neighbors(db, 0.6, device="cpu")
    assert pairs.dtype.names == ("query", "target", "similarity")
    _, rows = read_tsv(tmp_path / "n.tsv")
    assert [(db.names[p["query"]], db.names[p["target"]], p["similarity"]) for p in pairs] == [
        (a, b, np.float32(s)) for a, b, s, _ in rows
    ]
    c = lingo.cluster(db, 0.6, device="cpu")
    _, rows = read_tsv(tmp_path / "c.tsv")
    assert [(db.names[i], str(c.labels[i]), "1" if i in set(c.centroids.tolist()) else "0") for i in range(len(db))] == [
        tuple(r) for r in rows
    ]


def test_every_input_form_gives_the_same_result(tmp_path):
    smiles = [line.split()[0] for line in open(DB).read().splitlines()[:50]]
    want = lingo.matrix(smiles, device="cpu")
    assert np.array_equal(lingo.matrix(np.array(smiles), device="cpu"), want)
    assert np.array_equal(lingo.matrix(np.array(smiles, dtype=object), device="cpu"), want)
    assert np.array_equal(lingo.matrix(tuple(smiles), device="cpu"), want)
    assert np.array_equal(lingo.matrix(head_file(DB, tmp_path / "a.smi", 50), device="cpu"), want)
    try:
        import pandas as pd
    except ImportError:
        return
    assert np.array_equal(lingo.matrix(pd.Series(smiles), device="cpu"), want)


def test_backends_are_bit_identical():
    smiles = [line.split()[0] for line in open(DB).read().splitlines()[:120]]
    for metric in ("tanimoto", "vidal", "set"):
        ref = lingo.matrix(smiles, metric=metric, backend="reference", device="cpu")
        assert np.array_equal(lingo.matrix(smiles, metric=metric, backend="cpu", device="cpu"), ref)


def test_known_values():
    # CCO -> Lingos (q=2) CC, CO; CCN -> CC, CN: Tanimoto 1 / 3.
    assert lingo.matrix(["CCO", "CCN"], q=2)[0, 1] == np.float32(1 / 3)
    # Shorter than q: similarity 0 to everything, itself included.
    assert lingo.matrix(["CC"], q=4)[0, 0] == 0
    m = lingo.molecules(["CCO", "CCN"], names=["ethanol", "ethylamine"], q=3)
    assert m.names == ["ethanol", "ethylamine"] and m.q == 3 and len(m) == 2


def test_invalid_smiles_name_the_place(tmp_path):
    with pytest.raises(molaccel.InputError) as e:
        lingo.molecules(["CCO", "CC(C", "CCN"])
    assert e.value.path == "<smiles>" and e.value.line == 2
    bad = tmp_path / "bad.smi"
    bad.write_text("CCO a\nCC[N b\nCCC c\n")
    with pytest.raises(molaccel.InputError) as e:
        lingo.search(bad, DB)
    assert e.value.path == str(bad) and e.value.line == 2 and str(bad) + ":2:" in str(e.value)
    m = lingo.molecules(bad, skip_invalid=True)
    assert len(m) == 2 and m.read_stats["skipped_invalid"] == 1


def test_bad_arguments_raise_clear_errors(tmp_path):
    with pytest.raises(molaccel.InputError):
        lingo.search(["CCO"], ["CCO"], metric="cosine")
    with pytest.raises(molaccel.InputError):
        lingo.matrix(["CCO"], q=9)
    with pytest.raises(molaccel.InputError):
        lingo.neighbors(["CCO"], threshold=1.5)
    with pytest.raises(molaccel.InputError):
        lingo.search(["CCO"], ["CCO"], k=0)
    with pytest.raises(molaccel.InputError):
        lingo.search(tmp_path / "missing.smi", ["CCO"])
    with pytest.raises(molaccel.InputError):
        lingo.search(lingo.molecules(["CCO"], q=3), lingo.molecules(["CCO"], q=4))
    with pytest.raises(TypeError):
        lingo.matrix([1, 2])
    with pytest.raises(ValueError):
        lingo.matrix(["CCO"], output_type="int64")


def test_threads_calling_in_parallel_get_the_same_results():
    db = lingo.molecules(DB)
    queries = [line.split()[0] for line in open(DB).read().splitlines()[:64]]
    want = lingo.search(queries, db, k=5, device="cpu")
    results = run_in_threads(lambda i: lingo.search(queries, db, k=5, device="cpu", threads=1 + i % 2), 6)
    for r in results:
        assert np.array_equal(r.indices, want.indices) and np.array_equal(r.similarities, want.similarities)


def test_info_says_what_ran():
    info = {}
    lingo.search(["CCOCC", "CCNCC"], ["CCOCC", "c1ccccc1"], k=1, device="cpu", info=info)
    assert info["backend"].startswith("cpu") and info["pairs"] == 4 and info["seconds"] >= 0
    info = {}
    lingo.cluster(["CCOCC", "CCNCC"], device="cpu", backend="reference", info=info)
    assert info["backend"] == "reference"


def test_csv_database_with_smiles_given_as_data(tmp_path):
    csv = tmp_path / "db.csv"
    csv.write_text("id,smiles\na,CCOCC\nb,CCNCC\n")
    idx, sim = lingo.search(["CCNCC"], csv, k=1, smiles_column="smiles", device="cpu")
    assert idx.tolist() == [[1]] and sim.tolist() == [[1.0]]
    assert lingo.molecules(csv, smiles_column=2).names == ["a", "b"]


def test_results_are_contiguous_arrays_of_their_own():
    db = lingo.molecules(DATA / "lingo" / "demo4096.smi")
    idx, sim = lingo.search(db, db, k=7, device="cpu")
    for a in (idx, sim):
        assert a.flags.c_contiguous and a.flags.writeable and a.shape == (len(db), 7)
    assert not np.shares_memory(idx, sim)
    assert idx.dtype == np.uint32 and sim.dtype == np.float32
    # Every hit as the matrix has it (the split into two arrays keeps the pairs together).
    m = lingo.matrix(db, device="cpu")
    rows = np.arange(len(db))[:, None]
    assert np.array_equal(sim, m[rows, idx])
    again = lingo.matrix(db, device="cpu")
    assert not np.shares_memory(m, again) and np.array_equal(m, again)


def test_device_output_needs_a_gpu():
    if molaccel.info()["gpus"]:
        pytest.skip("this machine has a GPU (test_gpu.py covers device_output)")
    for device in ("auto", "cpu"):
        with pytest.raises((molaccel.DeviceUnavailable, molaccel.NotCompiled)) as e:
            lingo.matrix(["CCO", "CCN"], device=device, device_output=True)
    assert isinstance(e.value, RuntimeError) and "device_output=True" in str(e.value)
    with pytest.raises(ValueError):
        lingo.matrix(["CCO"], device_output=True, output_type="u8")
    with pytest.raises(TypeError):
        lingo.matrix(["CCO"], device_output="yes")
