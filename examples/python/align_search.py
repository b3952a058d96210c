"""Smith-Waterman search from Python: three queries against the bundled 400 UniProt proteins,
hits as a NumPy structured array with the CLI's TSV columns (a pandas DataFrame when pandas is
installed)."""

from pathlib import Path
import tempfile

from molaccel import align

data = Path(__file__).resolve().parents[2] / "data" / "align"
with tempfile.TemporaryDirectory() as tmp:
    db = align.Database.build(data / "demo_db.fasta", Path(tmp) / "demo.db")  # like `align makedb`
    hits = align.search(data / "demo_queries.fasta", db, k=3)

for h in hits:
    print(f"{h['query'][:28]:28} {h['subject'].split('|')[0]:10} score {h['score']:5d}  "
          f"E={h['evalue']:.2g}  identity {h['identity']:.1f}%")
assert list(hits.dtype.names[:3]) == ["query", "subject", "score"]
assert len(hits) == 3 * 3 and (hits["score"][:2] >= hits["score"][1:3]).all()  # best first within a query

try:
    import pandas as pd
except ImportError:
    pd = None
if pd is not None:
    print(pd.DataFrame(hits).groupby("query")["score"].max())
