"""LINGO similarity from Python: the five first molecules of the bundled ZINC sample against all
4,096, as `molaccel demo` does, then a Butina clustering of the set."""

from pathlib import Path

from molaccel import lingo

data = Path(__file__).resolve().parents[2] / "data" / "lingo"
db = lingo.molecules(data / "demo4096.smi")  # read and cut into Lingos once, used twice below
queries = [line.split()[0] for line in (data / "demo4096.smi").read_text().splitlines()[:5]]

indices, similarities = lingo.search(queries, db, k=5)
for i, smiles in enumerate(queries):
    best = ", ".join(f"{db.names[j]} {s:.3f}" for j, s in zip(indices[i, 1:], similarities[i, 1:]))
    print(f"{smiles[:30]:30}  {best}")
    assert indices[i, 0] == i and similarities[i, 0] == 1.0  # each query finds itself first

clusters = lingo.cluster(db, threshold=0.7)
print(f"Butina clustering at 0.7: {len(clusters.centroids)} clusters from {clusters.pairs} neighbour pairs")
assert clusters.labels.max() + 1 == len(clusters.centroids)
