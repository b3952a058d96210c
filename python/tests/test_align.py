"""molaccel.align against the CLI: the same hits and columns, databases, inputs, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import molaccel
from molaccel import align

from helpers import DATA, THREADS, cli, read_tsv, run_in_threads

QUERIES = DATA / "align" / "demo_queries.fasta"
DB = DATA / "align" / "demo_db.fasta"


def tsv_rows(hits: np.ndarray) -> list[list[str]]:
    """The hits as the CLI prints them (src/align/search.cpp, write_hits_tsv)."""
    rows = []
    for h in hits:
        row = [h["query"], h["subject"], str(h["score"])]
        row += ["NA", "NA"] if math.isnan(h["bitscore"]) else [f"{h['bitscore']:.1f}", f"{h['evalue']:.2g}"]
        if h["alnlen"]:
            row += [str(h[c]) for c in ("qstart", "qend", "sstart", "send")]
            row += [f"{h['identity']:.2f}", str(h["alnlen"])]
        else:
            row += ["NA"] * 6
        rows.append(row)
    return rows


def test_search_matches_the_cli_tsv(tmp_path):
    cli("align", "search", QUERIES, DB, "-k", 5, "-o", tmp_path / "hits.tsv", "--device", "cpu", "--threads", THREADS)
    header, want = read_tsv(tmp_path / "hits.tsv")
    hits = align.search(QUERIES, DB, k=5, device="cpu", threads=THREADS)
    assert list(hits.dtype.names) == header
    assert len(hits) == 3 * 5
    assert tsv_rows(hits) == want


def test_scores_only_and_no_evalues_match_the_cli(tmp_path):
    out = tmp_path / "hits.tsv"
    cli("align", "search", QUERIES, DB, "-k", 3, "-o", out, "--no-traceback", "--no-evalue", "--matrix", "PAM30",
        "--gap-open", 9, "--gap-extend", 1, "--device", "cpu")
    hits = align.search(QUERIES, DB, k=3, matrix="PAM30", gap_open=9, gap_extend=1, traceback=False, evalue=False,
                        device="cpu")
    assert tsv_rows(hits) == read_tsv(out)[1]
    assert np.isnan(hits["identity"]).all() and (hits["qstart"] == 0).all()


def test_database_build_open_and_inputs_agree(tmp_path):
    built = align.Database.build(DB, tmp_path / "demo.db")
    opened = align.Database.open(tmp_path / "demo.db")
    memory = align.Database.from_fasta(DB)
    assert len(built) == len(opened) == len(memory) == 400
    assert opened.ids == memory.ids and opened.residues == memory.residues
    q = align.read_fasta(QUERIES)
    want = align.search(q, memory, k=4, device="cpu", indices=True)
    got = align.search(q, opened, k=4, device="cpu", indices=True)
    assert np.array_equal(got, want)
    pairs = [(q.ids[i], q.sequence(i)) for i in range(len(q))]
    assert np.array_equal(align.search(pairs, tmp_path / "demo.db", k=4, device="cpu", indices=True), want)
    plain = align.search([s for _, s in pairs], memory, k=4, device="cpu")
    assert plain["query"].tolist() == [str(i + 1) for i in range(3) for _ in range(4)]
    assert np.array_equal(plain["score"], want["score"])
    assert (want["subject"] == np.array(memory.ids, dtype=object)[want["subject_index"]]).all()


def test_hand_checked_alignment():
    # HEAGAWGHEE against itself: the sum of BLOSUM62's diagonal for these letters.
    hits = align.search([("q", "HEAGAWGHEE")], align.Database.from_sequences([("s", "HEAGAWGHEE")]), evalue=False)
    assert hits["score"].tolist() == [8 + 5 + 4 + 6 + 4 + 11 + 6 + 8 + 5 + 5]
    assert hits["identity"].tolist() == [100.0] and hits["alnlen"].tolist() == [10]


def test_backends_agree():
    info = {}
    ref = align.search(QUERIES, DB, k=5, backend="reference", device="cpu", info=info)
    assert info["kernel"].startswith("reference") and info["cells"] > 0
    assert np.array_equal(align.search(QUERIES, DB, k=5, backend="cpu", device="cpu"), ref)


def test_bad_inputs_name_the_place(tmp_path):
    bad = tmp_path / "bad.fasta"
    bad.write_text(">a\nMKV\n>b\nMK1V\n")
    with pytest.raises(molaccel.InputError) as e:
        align.search(bad, DB)
    assert e.value.path == str(bad) and e.value.line == 4
    with pytest.raises(molaccel.InputError):
        align.search([("a", "MK#")], DB)
    with pytest.raises(molaccel.InputError):
        align.search(QUERIES, DB, matrix="BLOSUM99")
    with pytest.raises(molaccel.InputError):
        align.search(QUERIES, DB, gap_open=0)
    with pytest.raises(molaccel.InputError):
        align.search(QUERIES, DB, k=0)
    with pytest.raises(molaccel.InputError):
        align.Database.open(tmp_path / "missing.db")
    with pytest.raises(TypeError):
        align.search([1, 2], DB)


def test_threads_calling_in_parallel_get_the_same_results():
    db = align.Database.from_fasta(DB)
    want = align.search(QUERIES, db, k=5, device="cpu")
    results = run_in_threads(lambda i: align.search(QUERIES, db, k=5, device="cpu", threads=1 + i % 2), 4)
    for r in results:
        assert np.array_equal(r, want)
