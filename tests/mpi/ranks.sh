#!/usr/bin/env bash
# Runs one MPI case: the same command as one process and under mpirun with 1..4 ranks, outputs
# compared byte for byte; or a failure case (a corrupt shard, a command that does not split).
#   ranks.sh MOLACCEL MPIEXEC DATA_DIR WORK_DIR CASE
set -euo pipefail
molaccel=$1 mpiexec=$2 data=$3 work=$4 case=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work"
# Containers and CI run as root; Open MPI refuses that unless told (these are mpirun's variables).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { local n=$1; shift; "$mpiexec" --oversubscribe -np "$n" "$molaccel" -q "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# same OUTPUT_NAME RANKS... -- ARGS (ARGS contain @OUT@ for the output path)
same() {
  local name=$1; shift
  local ranks=()
  while [ "$1" != "--" ]; do ranks+=("$1"); shift; done
  shift
  local args=("$@") ref=("${@//@OUT@/$name.ref}")
  "$molaccel" -q "${ref[@]}"
  for n in "${ranks[@]}"; do
    mpi "$n" "${args[@]//@OUT@/$name.$n}" || fail "$name: $n ranks exited with $?"
    # (@OUT@ may carry a suffix: OUT.npy)
    cmp "$name.ref"* "$name.$n"* || fail "$name: $n ranks differ from one process"
  done
  echo "ok: $name identical for ranks ${ranks[*]} ($(wc -c < "$(echo "$name.ref"*)") bytes)"
}

# A random protein FASTA (fixed seed): lengths from 1 to ~800, some repeated sequences (equal
# scores, so ties are ordered by database position) and one long subject (an uneven last shard).
random_fasta() {
  awk -v n="$1" -v seed="$2" 'BEGIN {
    srand(seed); aa = "ACDEFGHIKLMNPQRSTVWY"
    for (i = 0; i < n; i++) {
      if (i > 0 && i % 7 == 0) { print ">r" i " copy of r" i-7; print s[i-7]; s[i] = s[i-7]; continue }
      len = int(rand() * rand() * 800) + 1; if (i == 5) len = 3000
      t = ""; for (j = 0; j < len; j++) t = t substr(aa, int(rand() * 20) + 1, 1)
      s[i] = t; print ">r" i " random"; print t
    }
  }'
}

# Random SMILES (fixed seed): chains of 1 to ~30 fragments, every 7th molecule a copy of an earlier
# one (equal similarities: ties ordered by database index), short ones without Lingos, every 5th
# unnamed (named by its line number).
random_smiles() {
  awk -v n="$1" -v seed="$2" 'BEGIN {
    srand(seed); split("C N O CC C(C) C(=O) c1ccccc1 Cl S CN", f, " ")
    for (i = 0; i < n; i++) {
      if (i > 0 && i % 7 == 0) { s[i] = s[int(rand() * i)] }
      else { len = int(rand() * rand() * 30) + 1; t = ""; for (j = 0; j < len; j++) t = t f[int(rand() * 10) + 1]; s[i] = t }
      if (i % 5 == 4) print s[i]; else print s[i] " m" i
    }
  }'
}

case "$case" in
  align_data)
    "$molaccel" -q align makedb "$data/align/demo_db.fasta" -o db
    same hits 1 2 3 4 -- align search "$data/align/demo_queries.fasta" db -k 10 -o @OUT@
    same fasta_db 3 -- align search "$data/align/demo_queries.fasta" "$data/align/demo_db.fasta" -k 5 -o @OUT@
    # A directory from before ids.index.bin: the ids file is scanned instead.
    rm db/ids.index.bin
    same old_dir 2 -- align search "$data/align/demo_queries.fasta" db -k 10 -o @OUT@
    ;;
  align_random)
    random_fasta 61 11 > db.fasta
    random_fasta 9 23 > queries.fasta
    "$molaccel" -q align makedb db.fasta -o db
    same random 1 2 3 4 -- align search queries.fasta db -k 7 -o @OUT@
    same no_traceback 3 -- align search queries.fasta db -k 50 --no-traceback -o @OUT@
    same no_evalue 4 -- align search queries.fasta db -k 3 --no-evalue --gap-open 5 --gap-extend 2 -o @OUT@
    ;;
  align_more_ranks)
    printf ">a\nMKVLA\n>b\nMKVLAW\n>c\nWWKVL\n" > db.fasta
    "$molaccel" -q align makedb db.fasta -o db
    same tiny 4 -- align search db.fasta db -k 2 -o @OUT@
    ;;
  align_corrupt)
    random_fasta 40 5 > db.fasta
    "$molaccel" -q align makedb db.fasta -o db
    # A code outside the alphabet in the last residue (the longest subject): one rank's shard holds it.
    size=$(stat -c %s db/residues.bin)
    printf '\xff' | dd of=db/residues.bin bs=1 seek=$((size - 1)) conv=notrunc status=none
    set +e
    mpi 3 align search db.fasta db -k 5 -o hits.tsv 2> err.txt
    rc=$?
    set -e
    cat err.txt
    [ "$rc" -eq 1 ] || fail "a corrupt shard exited $rc, not 1 (bad input)"
    # The rank whose shard holds the byte (which rank that is follows the balance of work).
    grep -qE "rank [0-9] of 3: .*residues.bin.*outside the alphabet" err.txt || fail "no message naming the rank and the cause"
    [ "$(grep -c 'molaccel: error' err.txt)" -eq 1 ] || fail "expected one error message"
    [ ! -e hits.tsv ] || fail "an output file was left"
    [ -z "$(ls -A . | grep -v -e '^db' -e '^err.txt$')" ] || fail "temporary files were left: $(ls -A)"
    echo "ok: corrupt shard -> exit $rc, one message, no output"
    ;;
  not_distributed)
    "$molaccel" -q align makedb "$data/align/demo_db.fasta" -o db
    set +e
    mpi 2 align makedb "$data/align/demo_db.fasta" -o db2 2> err.txt
    rc=$?
    set -e
    cat err.txt
    [ "$rc" -ne 0 ] || fail "a command that does not split its work ran on 2 ranks"
    grep -q "does not split its work across MPI ranks" err.txt || fail "no clear message"
    mpi 2 --no-mpi align makedb "$data/align/demo_db.fasta" -o db3 || fail "--no-mpi did not run alone"
    echo "ok: refused on 2 ranks, ran with --no-mpi"
    ;;
  lingo_data)
    head -n 700 "$data/lingo/nci_first5k.smi" > db.smi
    head -n 40 "$data/lingo/demo4096.smi" > queries.smi
    same search 1 2 3 4 -- lingo search queries.smi db.smi -k 10 -o @OUT@
    same self_search 3 -- lingo search db.smi db.smi -k 5 -o @OUT@
    same neighbors 1 2 3 4 -- lingo neighbors db.smi --threshold 0.6 -o @OUT@
    same neighbors_npy 2 4 -- lingo neighbors db.smi --threshold 0.5 -o @OUT@.npy
    same cluster 2 3 4 -- lingo cluster db.smi --threshold 0.6 -o @OUT@
    same matrix 1 3 -- lingo matrix queries.smi db.smi -o @OUT@.npy
    same self_matrix 2 4 -- lingo matrix queries.smi -o @OUT@.npy
    same matrix_u8 3 -- lingo matrix queries.smi db.smi --output-type u8 -o @OUT@.npy
    # Fewer queries than ranks (empty query blocks) and k beyond a rank's slice.
    head -n 3 queries.smi > few.smi
    same few_queries 2 4 -- lingo search few.smi db.smi -k 300 -o @OUT@.npy
    # The merge's cost is reported (rank 0's part).
    mpi 3 --json report.json lingo search queries.smi db.smi -k 10 -o hits.tsv
    grep -q '"bytes_received"' report.json && grep -q '"merge"' report.json || fail "no merge in --json"
    ;;
  lingo_slices)
    # Each rank parses a byte slice cut at a line boundary: a byte order mark, CRLF lines, blank
    # lines, unnamed molecules (named by their line numbers), an invalid line, a line longer than
    # a slice and no final newline must give the one-process names, hits and errors.
    {
      printf '\xef\xbb\xbf'
      head -n 300 "$data/lingo/nci_first5k.smi" |
        awk '{ if (NR % 3 == 0) printf "%s\r\n", $1; else if (NR % 5 == 0) printf "\n%s %s\n", $1, $2; else print }'
      printf 'C(C bad\n%s long\nCCO last' "$(printf 'C%.0s' $(seq 3000))"
    } > db.smi
    same search 1 2 3 4 -- lingo search db.smi db.smi -k 5 --skip-invalid -o @OUT@
    same neighbors 3 -- lingo neighbors db.smi --threshold 0.7 --skip-invalid -o @OUT@
    set +e
    "$molaccel" -q lingo search db.smi db.smi -k 5 -o one.tsv 2> one.txt
    mpi 3 lingo search db.smi db.smi -k 5 -o three.tsv 2> err.txt
    rc=$?
    set -e
    cat err.txt
    where=$(grep -o 'db.smi:[0-9]*' one.txt) || fail "one process: no FILE:LINE"
    [ "$rc" -eq 1 ] || fail "an invalid line exited $rc, not 1 (bad input)"
    grep -q "rank [0-9] of 3: $where:" err.txt || fail "ranks did not name $where"
    [ ! -e three.tsv ] || fail "an output file was left"
    echo "ok: slices identical for 1-4 ranks; an invalid line -> $where on every rank count"
    # The same file gzip-compressed: each rank streams it and keeps only its range of lines.
    gzip -c db.smi > db.smi.gz
    same gz_search 1 2 3 4 -- lingo search db.smi.gz db.smi.gz -k 5 --skip-invalid -o @OUT@
    same gz_neighbors 3 -- lingo neighbors db.smi.gz --threshold 0.7 --skip-invalid -o @OUT@
    same gz_output 2 -- lingo search db.smi db.smi.gz -k 3 --skip-invalid -o @OUT@.gz
    same gz_matrix 3 -- lingo matrix db.smi.gz db.smi --skip-invalid --output-type fp16 -o @OUT@.npy
    same gz_cluster 4 -- lingo cluster db.smi.gz --threshold 0.6 --skip-invalid -o @OUT@
    set +e
    mpi 4 lingo search db.smi.gz db.smi.gz -k 5 -o gz.tsv 2> err.txt
    rc=$?
    set -e
    cat err.txt
    [ "$rc" -eq 1 ] || fail "an invalid line in a .gz exited $rc, not 1 (bad input)"
    grep -q "rank [0-9] of 4: db.smi.gz:${where#db.smi:}:" err.txt || fail "ranks did not name the .gz line"
    [ ! -e gz.tsv ] || fail "an output file was left"
    # A truncated .gz: every rank stops, one message, no output.
    head -c $(($(stat -c %s db.smi.gz) / 2)) db.smi.gz > cut.smi.gz
    set +e
    mpi 3 lingo search cut.smi.gz db.smi -k 5 --skip-invalid -o cut.tsv 2> err.txt
    rc=$?
    set -e
    cat err.txt
    [ "$rc" -eq 1 ] || fail "a truncated .gz exited $rc, not 1"
    grep -q "rank 0 of 3: cut.smi.gz:[0-9]*: gzip stream ends early" err.txt || fail "no message naming the rank and the cause"
    [ "$(grep -c 'molaccel: error' err.txt)" -eq 1 ] || fail "expected one error message"
    [ -z "$(ls -A . | grep -v -e '^db' -e '^err.txt$' -e '\.ref' -e '\.[1-4]' -e '^one' -e '^cut.smi.gz$')" ] ||
      fail "files were left: $(ls -A)"
    echo "ok: .gz slices identical for 1-4 ranks; an invalid or truncated .gz -> one message, no output"
    ;;
  lingo_random)
    random_smiles 500 7 > db.smi
    random_smiles 60 19 > queries.smi
    same search 1 2 3 4 -- lingo search queries.smi db.smi -k 9 -o @OUT@
    same self_npy 2 3 -- lingo search db.smi db.smi -k 40 -o @OUT@.npy
    same neighbors 2 3 4 -- lingo neighbors db.smi --threshold 0.4 --metric set -o @OUT@
    same all_pairs 3 -- lingo neighbors queries.smi --threshold 0 -o @OUT@
    same matrix 2 4 -- lingo matrix queries.smi db.smi --metric vidal -o @OUT@.npy
    same cluster 3 -- lingo cluster db.smi --threshold 0.5 -o @OUT@
    ;;
  lingo_more_ranks)
    printf "CCO a\nCCN b\nc1ccccc1 c\n" > db.smi
    same search 4 -- lingo search db.smi db.smi -k 3 -o @OUT@
    same neighbors 4 -- lingo neighbors db.smi --threshold 0.0 -o @OUT@
    same matrix 4 -- lingo matrix db.smi -o @OUT@.npy
    same cluster 4 -- lingo cluster db.smi --threshold 0.3 -o @OUT@
    ;;
  *) echo "unknown case $case" >&2; exit 2 ;;
esac
