"""Smith-Waterman (Gotoh, affine gaps) protein database search, as ``molaccel align search``.

Conventions (as the CLI's ``--help``):

- Scoring: local alignment with affine gaps; a gap of length k costs gap_open + (k-1) x
  gap_extend. The defaults (BLOSUM62, 11, 1) equal BLAST's -gapopen 10 -gapextend 1, parasail's
  and SSW's -o 11 -e 1 and CUDASW++'s --gop -11 --gex -1.
- Matrices: BLOSUM45/50/62/80/90, PAM30/70/250 (NCBI), or a path to a matrix in NCBI's format.
- Alphabet: the 20 amino acids and B Z X U O *, any case (U and O score as X in built-in
  matrices); any other letter raises :class:`molaccel.InputError` naming the file, line, record
  and position.
- Hits: score > 0, best first, ties by position in the database FASTA. E-values: Karlin-Altschul
  with NCBI's published gapped lambda and K and BLAST's length adjustment; a matrix/gap
  combination without published values is an error unless ``evalue=False``.
"""

from __future__ import annotations

import os
from typing import Any, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._common import check_device

__all__ = ["Database", "Sequences", "read_fasta", "sequences", "search", "HIT_DTYPE", "matrix_names"]

_align = _core.align

#: The columns of ``molaccel align search``'s TSV, in its order.
HIT_DTYPE = np.dtype(
    [
        ("query", object),
        ("subject", object),
        ("score", np.int32),
        ("bitscore", np.float64),
        ("evalue", np.float64),
        ("qstart", np.uint32),
        ("qend", np.uint32),
        ("sstart", np.uint32),
        ("send", np.uint32),
        ("identity", np.float64),
        ("alnlen", np.uint32),
    ]
)


class Sequences:
    """Encoded protein sequences in input order (``len(s)``, ``s.ids``, ``s.sequence(i)``).

    Example::

        >>> from molaccel import align
        >>> s = align.sequences([("a", "MKV"), ("b", "HEAGAWGHEE")])
        >>> len(s), s.ids, s.sequence(1)
        (2, ['a', 'b'], 'HEAGAWGHEE')
    """

    __slots__ = ("_set",)

    def __init__(self, core_set: Any) -> None:
        self._set = core_set

    def __len__(self) -> int:
        return len(self._set)

    @property
    def ids(self) -> list[str]:
        return self._set.ids

    def sequence(self, i: int) -> str:
        """The letters of sequence i (upper case)."""
        return self._set.sequence(i)


SequenceInput = Union[Sequences, str, "os.PathLike[str]", Sequence[str], Sequence[Tuple[str, str]]]


def read_fasta(path: str | os.PathLike[str]) -> Sequences:
    """Reads a FASTA file (plain or gzip); ids are the first word after '>'.

    Example::

        >>> from molaccel import align
        >>> q = align.read_fasta("data/align/demo_queries.fasta")
        >>> len(q)
        3
    """
    return Sequences(_align.read_fasta(os.fspath(path)))


def sequences(source: SequenceInput) -> Sequences:
    """Sequences from a FASTA path, a list of sequences (ids "1", "2", ...) or of (id, sequence)
    pairs.

    Example::

        >>> from molaccel import align
        >>> len(align.sequences(["MKVLA", "MKV"]))
        2
    """
    if isinstance(source, Sequences):
        return source
    if isinstance(source, (str, os.PathLike)):
        return read_fasta(source)
    pairs = []
    for i, item in enumerate(source):
        if isinstance(item, str):
            pairs.append((str(i + 1), item))
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            pairs.append((str(item[0]), str(item[1])))
        else:
            raise TypeError(f"sequence #{i + 1}: give a str or an (id, sequence) pair, not {item!r}")
    return Sequences(_align.encode(pairs))


class Database:
    """A searchable protein database: sequences sorted by length, each remembering its position
    in the input FASTA. From a FASTA file (in memory) or a database directory (memory-mapped).

    Example::

        >>> from molaccel import align
        >>> db = align.Database.build("data/align/demo_db.fasta", "demo.db")
        >>> len(align.Database.open("demo.db")) == len(db)
        True
    """

    __slots__ = ("_db",)

    def __init__(self, core_db: Any) -> None:
        self._db = core_db

    @classmethod
    def build(cls, fasta: str | os.PathLike[str], path: str | os.PathLike[str]) -> "Database":
        """Encodes, length-sorts and indexes ``fasta`` into the directory ``path``
        (``molaccel align makedb``; files replaced atomically) and returns it."""
        db = _align.Database.from_fasta(os.fspath(fasta))
        db.write(os.fspath(path))
        return cls(_align.Database.open(os.fspath(path)))

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> "Database":
        """Opens a database directory made by :meth:`build` or ``molaccel align makedb``."""
        return cls(_align.Database.open(os.fspath(path)))

    @classmethod
    def from_fasta(cls, path: str | os.PathLike[str]) -> "Database":
        """A database in memory from a FASTA file (plain or gzip)."""
        return cls(_align.Database.from_fasta(os.fspath(path)))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Database":
        """A FASTA file or a database directory, whichever ``path`` is."""
        return cls(_align.Database.load(os.fspath(path)))

    @classmethod
    def from_sequences(cls, source: SequenceInput) -> "Database":
        """A database in memory from :func:`sequences` input."""
        return cls(_align.Database.from_sequences(sequences(source)._set))

    def __len__(self) -> int:
        return len(self._db)

    @property
    def residues(self) -> int:
        return self._db.residues

    @property
    def max_length(self) -> int:
        return self._db.max_length

    @property
    def ids(self) -> list[str]:
        """Sequence ids in FASTA order (``hits["subject"]`` uses them)."""
        return self._db.ids


def matrix_names() -> list[str]:
    """The built-in scoring matrices.

    Example::

        >>> from molaccel import align
        >>> "BLOSUM62" in align.matrix_names()
        True
    """
    return list(_align.matrix_names())


def search(
    queries: SequenceInput,
    db: Database | str | os.PathLike[str],
    k: int = 10,
    *,
    matrix: str = "BLOSUM62",
    gap_open: int = 11,
    gap_extend: int = 1,
    traceback: bool = True,
    evalue: bool = True,
    device: str = "auto",
    threads: int = 0,
    backend: str = "auto",
    progress: bool = False,
    indices: bool = False,
    info: dict[str, Any] | None = None,
) -> np.ndarray:
    """Every query against every database sequence; best ``k`` hits per query
    (``molaccel align search``).

    Args:
        queries: a FASTA path, a list of sequences, a list of (id, sequence) pairs or
            :class:`Sequences`.
        db: a :class:`Database`, or a FASTA path or database directory.
        k: hits per query.
        matrix: a built-in matrix name (:func:`matrix_names`) or an NCBI-format matrix file.
        gap_open: cost of a gap of length 1. gap_extend: cost of each further gap position.
        traceback: align each reported hit (coordinates, identity, length); ``False``: scores only.
        evalue: bit scores and E-values (``False`` for matrix/gap sets without published values).
        device, threads, progress: where it runs; backend: ``"auto"``, ``"reference"`` (the
            32-bit oracle), ``"cpu"`` or ``"cuda"``.
        indices: also return the 0-based query index and database FASTA position of each hit
            (fields ``query_index`` and ``subject_index``).
        info: a dict to fill with what ran (the CLI's ``--json`` fields): ``kernel``, ``cells``,
            ``rescored_pairs``, ``scoring_seconds``; ``seconds``, the whole library call (scoring,
            statistics, traceback).

    Returns:
        A structured array with the TSV's columns ``query``, ``subject`` (ids), ``score``,
        ``bitscore``, ``evalue``, ``qstart``, ``qend``, ``sstart``, ``send`` (1-based inclusive),
        ``identity`` (percent of alignment columns), ``alnlen``; queries in order, each best
        first. Where the TSV prints NA: NaN in float columns, 0 in coordinate columns.
        ``pandas.DataFrame(hits)`` makes a table of it.

    Example::

        >>> from molaccel import align
        >>> hits = align.search([("q", "HEAGAWGHEE")], align.Database.from_sequences(
        ...     [("s1", "PAWHEAE"), ("s2", "HEAGAWGHEE")]), k=2, evalue=False)
        >>> hits["subject"].tolist(), hits["score"].tolist()
        (['s2', 's1'], [62, 17])
    """
    check_device(device, threads)
    qs = sequences(queries)
    database = db if isinstance(db, Database) else Database.load(db)
    cols = _align.search(
        qs._set, database._db, int(k), str(matrix), int(gap_open), int(gap_extend), bool(traceback),
        bool(evalue), backend, device, threads, progress
    )
    if info is not None:
        info.update(cols["info"])
    dtype = HIT_DTYPE
    if indices:
        dtype = np.dtype(HIT_DTYPE.descr + [("query_index", np.uint32), ("subject_index", np.uint32)])
    out = np.empty(len(cols["score"]), dtype=dtype)
    for name in dtype.names or ():
        out[name] = cols[name]
    return out
