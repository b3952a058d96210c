"""LINGO chemical similarity (the SIML algorithm): SMILES strings are cut into overlapping
substrings of length ``q`` ("Lingos"); a molecule is the multiset of its Lingos and two molecules
are compared by a multiset similarity.

The functions mirror ``molaccel lingo search|matrix|neighbors|cluster`` and give the same bits.

Conventions (as the CLI's ``--help``):

- Inputs: a path to a .smi / .smi.gz file (SMILES, whitespace, optional name; names default to
  line numbers) or a CSV file with ``smiles_column``; or SMILES as a list of str, a NumPy string
  array or a pandas Series (names "1", "2", ... unless given); or a :class:`Molecules` made once
  with :func:`molecules` and reused.
- SMILES are used as given (no canonicalisation). An invalid SMILES raises
  :class:`molaccel.InputError` naming the file and line (or the position in the list).
- Preprocessing (default ``digits="paper"``, the SIML paper's): ring-closure digits -> 0, digits
  after + - H [ kept, %nn -> %0. ``digits="all"``: every digit -> 0 (CDK). ``halogens=True``:
  Cl -> L, Br -> R.
- Metrics: ``"tanimoto"`` (multiset, default), ``"vidal"`` (CDK LingoSimilarity), ``"set"``
  (distinct Lingos); fp32 from exact integer counts, bit-identical on every backend. A molecule
  with no Lingos (shorter than q) has similarity 0 to everything, itself included.
- ``device``: ``"auto"`` (GPUs when present, else CPU), ``"cpu"``, ``"gpu"``, ``"gpu:0,2"``;
  ``backend``: ``"auto"`` (from the device), ``"reference"`` (the oracle), ``"cpu"`` or ``"cuda"``.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple, Sequence, Union

import numpy as np

from . import _core
from ._common import check_device, is_path
from ._device import DeviceArray, check_device_output

__all__ = ["Molecules", "molecules", "search", "matrix", "neighbors", "cluster", "SearchResult", "Clustering"]

_lingo = _core.lingo


class Molecules:
    """A set of molecules cut into Lingos (q, digit and halogen rules fixed), ready to compare.

    Make one with :func:`molecules` and pass it to several calls to read and cut the input once.
    ``len(m)`` is the number of molecules, ``m.names`` their names (from the file, else "1", "2",
    ...), ``m.q``, ``m.digits``, ``m.halogens`` the options, ``m.read_stats`` what reading a file
    found (lines, molecules, skipped_invalid, first_skipped_line).

    Example::

        >>> from molaccel import lingo
        >>> m = lingo.molecules(["CCOCC", "CCNCC", "c1ccccc1"])
        >>> len(m), m.names
        (3, ['1', '2', '3'])
    """

    __slots__ = ("_set", "read_stats")

    def __init__(self, core_set: Any, read_stats: dict[str, int] | None = None) -> None:
        self._set = core_set
        self.read_stats = read_stats

    def __len__(self) -> int:
        return len(self._set)

    def __repr__(self) -> str:
        return f"<molaccel.lingo.Molecules: {len(self)} molecules, q={self.q}, digits={self.digits!r}>"

    @property
    def names(self) -> list[str]:
        return self._set.names

    @property
    def q(self) -> int:
        return self._set.q

    @property
    def digits(self) -> str:
        return self._set.digits

    @property
    def halogens(self) -> bool:
        return self._set.halogens

    @property
    def lingo_counts(self) -> np.ndarray:
        """Number of Lingos of each molecule (max(0, preprocessed length - q + 1)), uint32."""
        return self._set.magnitudes


SmilesInput = Union[Molecules, str, "os.PathLike[str]", Sequence[str], np.ndarray, Any]


def molecules(
    source: SmilesInput,
    *,
    names: Sequence[str] | None = None,
    q: int = 4,
    digits: str = "paper",
    halogens: bool = False,
    smiles_column: str | int | None = None,
    delimiter: str = ",",
    skip_invalid: bool = False,
) -> Molecules:
    """Reads or converts molecules once, for use in several calls.

    Args:
        source: a path (.smi, .smi.gz, or CSV with ``smiles_column``), or SMILES as a list of
            str, a NumPy string array or a pandas Series.
        names: names for SMILES given as data (default "1", "2", ...); files carry their own.
        q: Lingo length, 1..8.
        digits: ``"paper"`` (SIML/OpenEye rule) or ``"all"`` (every digit -> 0).
        halogens: replace Cl by L and Br by R before cutting Lingos.
        smiles_column: read CSV input: the SMILES column's name or 1-based index.
        delimiter: CSV field delimiter (one character).
        skip_invalid: skip (and count, in ``read_stats``) invalid SMILES lines instead of failing.

    Raises:
        molaccel.InputError: an invalid SMILES (file and line, or ``<smiles>`` and the 1-based
            position), a missing file, bad options.

    Example::

        >>> from molaccel import lingo
        >>> m = lingo.molecules(["CCO", "CCN"], names=["ethanol", "ethylamine"], q=2)
        >>> m.names
        ['ethanol', 'ethylamine']
    """
    if isinstance(source, Molecules):
        if (source.q, source.digits, source.halogens) != (q, digits, halogens):
            raise ValueError("molecules(): the Molecules were made with other q/digits/halogens options")
        return source
    if isinstance(source, (str, os.PathLike)):
        if names is not None:
            raise ValueError("names are read from the file; give names only with SMILES data")
        column = "" if smiles_column is None else str(smiles_column)
        core_set, stats = _lingo.read(os.fspath(source), q, digits, halogens, column, delimiter, skip_invalid)
        return Molecules(core_set, stats)
    if smiles_column is not None or skip_invalid:
        raise ValueError("smiles_column and skip_invalid apply to files, not to SMILES data")
    smiles = _smiles_list(source)
    name_list = [] if names is None else [str(n) for n in names]
    return Molecules(_lingo.from_smiles(smiles, name_list, q, digits, halogens))


def _smiles_list(source: Any) -> list[str]:
    if hasattr(source, "to_numpy") and not isinstance(source, np.ndarray):  # pandas Series / Index
        source = source.to_numpy()
    if isinstance(source, np.ndarray):
        if source.ndim != 1:
            raise ValueError(f"SMILES arrays must be one-dimensional (got shape {source.shape})")
        if source.dtype.kind == "S":
            return [s.decode("ascii") for s in source.tolist()]
        if source.dtype.kind not in "UO":
            raise TypeError(f"SMILES arrays must hold strings (got dtype {source.dtype})")
        source = source.tolist()
    if isinstance(source, (bytes, bytearray)):
        raise TypeError("give SMILES as a list of str, or a path as str / os.PathLike")
    result = list(source)
    for i, s in enumerate(result):
        if not isinstance(s, str):
            raise TypeError(f"SMILES #{i + 1} is a {type(s).__name__}, not a str")
    return result


def _prepare(
    source: SmilesInput, q: int, digits: str, halogens: bool, smiles_column: str | int | None
) -> Molecules:
    if isinstance(source, Molecules):  # prepared: its own q/digits/halogens apply
        return source
    column = smiles_column if is_path(source) else None  # the CSV column applies to files only
    return molecules(source, q=q, digits=digits, halogens=halogens, smiles_column=column)


def _same_source(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if is_path(a) and is_path(b):
        try:
            return os.path.samefile(a, b)
        except OSError:
            return False
    return False


class SearchResult(NamedTuple):
    """Top-k hits: ``indices[i, r]`` is the database index (0-based) of query i's r-th best hit,
    ``similarities[i, r]`` its similarity (float32); k' = min(k, database size) columns."""

    indices: np.ndarray
    similarities: np.ndarray


def search(
    queries: SmilesInput,
    database: SmilesInput,
    k: int = 10,
    *,
    metric: str = "tanimoto",
    q: int = 4,
    digits: str = "paper",
    halogens: bool = False,
    smiles_column: str | int | None = None,
    device: str = "auto",
    threads: int = 0,
    backend: str = "auto",
    progress: bool = False,
    info: dict[str, Any] | None = None,
) -> SearchResult:
    """Top-k most similar database molecules per query (``molaccel lingo search``).

    Hits are sorted by similarity, descending; ties go to the lower database index.

    Args:
        queries: query molecules (path, SMILES data or :class:`Molecules`).
        database: database molecules (the same kinds); the same file as ``queries`` is read once.
        k: hits per query (``k`` > database size gives every molecule).
        metric: ``"tanimoto"``, ``"vidal"`` or ``"set"``.
        q, digits, halogens, smiles_column: how inputs that are not :class:`Molecules` are read
            (see :func:`molecules`).
        device, threads, backend, progress: where and how it runs (module docstring).
        info: a dict to fill with what ran (the CLI's ``--json`` fields): ``backend``,
            ``pairs``, ``pairs_skipped``, ``seconds`` (the library call), ``prepare_seconds``,
            ``tiles``, ``tile_retries``.

    Returns:
        :class:`SearchResult` ``(indices, similarities)``: two arrays of shape
        (len(queries), min(k, len(database))), uint32 and float32.

    Example::

        >>> from molaccel import lingo
        >>> idx, sim = lingo.search(["CCOCC"], ["CCOCC", "CCOCCC", "c1ccccc1"], k=2)
        >>> idx.tolist(), sim.tolist()
        ([[0, 1]], [[1.0, 0.6666666865348816]])
    """
    check_device(device, threads)
    qs = _prepare(queries, q, digits, halogens, smiles_column)
    db = qs if _same_source(queries, database) else _prepare(database, q, digits, halogens, smiles_column)
    indices, similarities, ran = _lingo.search(qs._set, db._set, int(k), metric, backend, device, threads, progress)
    if info is not None:
        info.update(ran)
    return SearchResult(indices, similarities)


_OUTPUT_TYPES = {"fp32": "fp32", "float32": "fp32", "fp16": "fp16", "float16": "fp16", "u8": "u8", "uint8": "u8"}


def matrix(
    queries: SmilesInput,
    database: SmilesInput | None = None,
    *,
    output_type: Any = "fp32",
    metric: str = "tanimoto",
    q: int = 4,
    digits: str = "paper",
    halogens: bool = False,
    smiles_column: str | int | None = None,
    device: str = "auto",
    threads: int = 0,
    backend: str = "auto",
    progress: bool = False,
    info: dict[str, Any] | None = None,
    device_output: bool = False,
) -> np.ndarray | DeviceArray:
    """Dense LINGO similarity matrix, queries x database, row-major (``molaccel lingo matrix``).

    Args:
        queries: query molecules (path, SMILES data or :class:`Molecules`).
        database: database molecules; ``None``: all pairs within ``queries`` (one triangle is
            computed and mirrored).
        output_type: ``"fp32"`` (exact, bit-identical on every backend; ``np.float32``),
            ``"fp16"`` (the IEEE half nearest the fp32 value; ``np.float16``) or ``"u8"``
            (rint(255 s), ties to even; ``np.uint8``): the same bits as the CLI's .npy output.
        metric, q, digits, halogens, smiles_column, device, threads, backend, progress, info: as
            in :func:`search`.
        device_output: leave the matrix in GPU memory (on the first GPU of ``device``) as a
            :class:`molaccel.DeviceArray` of fp32 (the same bits), which CuPy and PyTorch take
            without a copy (``cupy.asarray(m)``, ``torch.from_dlpack(m)``). Needs a GPU
            (:class:`molaccel.DeviceUnavailable` without one); ``output_type`` must be fp32
            (convert on the GPU: ``cupy.asarray(m).astype(cupy.float16)``).

    Returns:
        An array of shape (len(queries), len(database)) that owns its memory (page-locked when
        a GPU is used, so the GPU writes it directly), or a :class:`molaccel.DeviceArray`.

    Example::

        >>> from molaccel import lingo
        >>> s = lingo.matrix(["CCOCC", "CCNCC", "CCOCC"])
        >>> s.shape, s.dtype, float(s[0, 2])
        ((3, 3), dtype('float32'), 1.0)
    """
    check_device(device, threads)
    key = np.dtype(output_type).name if not isinstance(output_type, str) else output_type
    if key not in _OUTPUT_TYPES:
        raise ValueError(f"unknown output_type {output_type!r} (fp32, fp16 or u8)")
    if check_device_output(device_output) and _OUTPUT_TYPES[key] != "fp32":
        raise ValueError("device_output=True gives the fp32 matrix; convert it on the GPU")
    qs = _prepare(queries, q, digits, halogens, smiles_column)
    db = None
    if database is not None and not _same_source(queries, database):
        db = _prepare(database, q, digits, halogens, smiles_column)._set
    if device_output:
        on_gpu, ran = _lingo.matrix_on_device(qs._set, db, metric, backend, device, threads)
        if info is not None:
            info.update(ran)
        return on_gpu
    values, ran = _lingo.matrix(qs._set, db, _OUTPUT_TYPES[key], metric, backend, device, threads, progress)
    if info is not None:
        info.update(ran)
    if _OUTPUT_TYPES[key] == "fp16":
        values = values.view(np.float16)
    return values


NEIGHBOR_DTYPE = np.dtype([("query", np.uint32), ("target", np.uint32), ("similarity", np.float32)])


def neighbors(
    database: SmilesInput,
    threshold: float = 0.7,
    *,
    metric: str = "tanimoto",
    q: int = 4,
    digits: str = "paper",
    halogens: bool = False,
    smiles_column: str | int | None = None,
    device: str = "auto",
    threads: int = 0,
    backend: str = "auto",
    progress: bool = False,
    info: dict[str, Any] | None = None,
) -> np.ndarray:
    """All pairs i < j with similarity >= threshold (``molaccel lingo neighbors``).

    Sparse output; a length bound skips pairs that cannot reach the threshold.

    Args:
        database: the molecules (path, SMILES data or :class:`Molecules`).
        threshold: minimum similarity, in [0, 1].
        metric, q, digits, halogens, smiles_column, device, threads, backend, progress, info: as
            in :func:`search`.

    Returns:
        A structured array with the TSV's columns ``query``, ``target`` (0-based indices,
        uint32, query < target) and ``similarity`` (float32), sorted by (query, target).

    Example::

        >>> from molaccel import lingo
        >>> p = lingo.neighbors(["CCOCC", "CCNCC", "CCOCC"], threshold=0.9)
        >>> p.tolist()
        [(0, 2, 1.0)]
    """
    check_device(device, threads)
    db = _prepare(database, q, digits, halogens, smiles_column)
    (query, target, similarity), ran = _lingo.neighbors(
        db._set, float(threshold), metric, backend, device, threads, progress
    )
    if info is not None:
        info.update(ran)
    out = np.empty(len(query), dtype=NEIGHBOR_DTYPE)
    out["query"], out["target"], out["similarity"] = query, target, similarity
    return out


class Clustering(NamedTuple):
    """Butina clustering: ``labels[i]`` is molecule i's 0-based cluster (clusters numbered in
    creation order), ``centroids[c]`` cluster c's centroid molecule, ``pairs`` the number of
    neighbour pairs used."""

    labels: np.ndarray
    centroids: np.ndarray
    pairs: int


def cluster(
    database: SmilesInput,
    threshold: float = 0.7,
    *,
    metric: str = "tanimoto",
    q: int = 4,
    digits: str = "paper",
    halogens: bool = False,
    smiles_column: str | int | None = None,
    device: str = "auto",
    threads: int = 0,
    backend: str = "auto",
    progress: bool = False,
    info: dict[str, Any] | None = None,
) -> Clustering:
    """Taylor-Butina clustering at a similarity threshold (``molaccel lingo cluster``).

    Molecules are visited by decreasing neighbour count (ties: lower index); each one not yet
    assigned becomes a centroid and takes its unassigned neighbours (RDKit's order). Uses the
    sparse neighbour graph (no N^2 memory).

    Args:
        database: the molecules (path, SMILES data or :class:`Molecules`).
        threshold: neighbour similarity, in [0, 1].
        metric, q, digits, halogens, smiles_column, device, threads, backend, progress, info: as
            in :func:`search`.

    Returns:
        :class:`Clustering` ``(labels, centroids, pairs)``.

    Example::

        >>> from molaccel import lingo
        >>> c = lingo.cluster(["CCOCC", "CCNCC", "CCOCC", "c1ccccc1"], threshold=0.9)
        >>> c.labels.tolist(), c.centroids.tolist()
        ([0, 1, 0, 2], [0, 1, 3])
    """
    check_device(device, threads)
    db = _prepare(database, q, digits, halogens, smiles_column)
    labels, centroids, pairs, ran = _lingo.cluster(db._set, float(threshold), metric, backend, device, threads, progress)
    if info is not None:
        info.update(ran)
    return Clustering(labels, centroids, int(pairs))
