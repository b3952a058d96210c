#!/usr/bin/env python3
"""A synthetic protein database for whole-command runs: 486,000 sequences (~177 M residues) with
the length distribution of db5k (bench/align/db5k_lengths.txt) and UniProt's amino-acid
frequencies, fixed seed. Usage: make_synthetic_db.py OUT.fasta"""
import os, sys
import numpy as np
rng = np.random.default_rng(2010)
lengths = np.array([int(l) for l in open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "db5k_lengths.txt")) if l.strip() and not l.startswith("#")])
n = 486000
picked = rng.choice(lengths, size=n)
aa = np.frombuffer(b"ARNDCQEGHILKMFPSTWYV", dtype=np.uint8)
freq = np.array([8.25,5.53,4.06,5.45,1.37,3.93,6.75,7.07,2.27,5.96,9.66,5.84,2.42,3.86,4.70,6.56,5.34,1.08,2.92,6.87])
seq = aa[rng.choice(20, size=int(picked.sum()), p=freq / freq.sum())].tobytes()
with open(sys.argv[1], "wb") as f:
    pos = 0
    for i, l in enumerate(picked):
        f.write(b">s%d\n" % i); f.write(seq[pos:pos + l]); f.write(b"\n"); pos += l
print(f"synthetic database: {n} sequences, {picked.sum() / 1e6:.1f} M residues")
