"""Reads a LINGO hits .npy with numpy.load and checks it against the TSV and the gzip TSV of the
same run: same pairs in the same order, float32 similarities bit-identical to the TSV's text.

usage: check_hits_outputs.py HITS.npy HITS.tsv HITS.tsv.gz QUERIES.smi DB.smi
"""
import gzip
import sys

import numpy as np


def names(path):
    with open(path) as f:
        return [line.split()[1] for line in f if line.strip()]


def main(npy_path, tsv_path, gz_path, queries_path, db_path):
    hits = np.load(npy_path)
    assert hits.dtype.names == ("query", "target", "similarity"), hits.dtype
    assert hits.dtype["similarity"] == np.dtype("<f4"), hits.dtype
    with open(tsv_path, "rb") as f:
        tsv = f.read()
    with gzip.open(gz_path, "rb") as f:
        assert f.read() == tsv, "the gzip TSV differs from the TSV"
    lines = tsv.decode().splitlines()
    assert lines[0].split("\t")[:3] == ["query", "target", "similarity"], lines[0]
    rows = [line.split("\t") for line in lines[1:]]
    assert len(rows) == len(hits), (len(rows), len(hits))
    query_names, db_names = names(queries_path), names(db_path)
    similarities = np.array([np.float32(r[2]) for r in rows], dtype="<f4")
    assert np.array_equal(similarities.view("<u4"), hits["similarity"].view("<u4")), "similarities differ"
    for row, hit in zip(rows, hits):
        assert row[0] == query_names[hit["query"]] and row[1] == db_names[hit["target"]], (row, hit)
    print(f"{len(hits)} hits agree")


if __name__ == "__main__":
    main(*sys.argv[1:])
