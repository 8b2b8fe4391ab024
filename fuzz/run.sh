#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for SECONDS each and prints, per
# target, how many inputs were executed and what was found.
#
# Usage: fuzz/run.sh SECONDS [TARGET...]
#
# A target that crashes (panic, timeout, out-of-memory, sanitizer report) is
# restarted on its corpus until its time is up, at most MAX_RESTARTS times
# (default 10), so one bug does not hide the others. Crashing inputs land in
# fuzz/artifacts/<target>/; the full libFuzzer output of a target is in
# fuzz/logs/<target>.log; scratch files go to /dev/shm (or fuzz/scratch/),
# removed at the end. Seeds the corpus first if fuzz/corpus is missing.
# Exits 1 when anything was found.
set -uo pipefail

if [[ $# -lt 1 || ! $1 =~ ^[0-9]+$ ]]; then
    echo "usage: $0 SECONDS [TARGET...]" >&2
    exit 2
fi
seconds=$1
shift

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# cargo-fuzz passes nightly-only flags (-Zsanitizer, -Cpasses=sancov-module);
# this lets the stable toolchain accept them.
export RUSTC_BOOTSTRAP=1

all_targets=(onnx_check torch_archive torch_irtext torch_code rows tensor_file)
if [[ $# -gt 0 ]]; then targets=("$@"); else targets=("${all_targets[@]}"); fi
max_restarts=${MAX_RESTARTS:-10}

[[ -d corpus ]] || ./seed.sh
mkdir -p logs
# The targets that need a file write it in a scratch directory under $TMPDIR
# (src/lib.rs). Keep that in memory when /dev/shm is there (a disk file
# rewritten per input costs most of the run), else in fuzz/scratch/; remove it
# at the end.
if [[ -d /dev/shm && -w /dev/shm ]]; then
    scratch=$(mktemp -d /dev/shm/diamond-fuzz.XXXXXX)
else
    scratch="$here/scratch"
    mkdir -p "$scratch"
fi
trap 'rm -rf "$scratch"' EXIT
for t in "${targets[@]}"; do mkdir -p "corpus/$t"; done

echo "building the fuzz targets..." >&2
if ! cargo fuzz build > logs/build.log 2>&1; then
    tail -30 logs/build.log >&2
    echo "cargo fuzz build failed (see fuzz/logs/build.log)" >&2
    exit 2
fi

found_any=0
summary=()
for t in "${targets[@]}"; do
    log="logs/$t.log"
    : > "$log"
    deadline=$(( $(date +%s) + seconds ))
    execs=0
    runs=0
    findings=()
    while :; do
        left=$(( deadline - $(date +%s) ))
        (( left >= 1 )) || break
        (( runs <= max_restarts )) || break
        runs=$(( runs + 1 ))
        echo "== $t: run $runs, ${left}s" >&2
        part=$(mktemp)
        TMPDIR="$scratch" cargo fuzz run "$t" "corpus/$t" -- \
            -max_total_time="$left" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 > "$part" 2>&1
        rc=$?
        cat "$part" >> "$log"
        # Executions: the final stats line, else the last status line (#N).
        n=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$part" | tail -1)
        if [[ -z $n ]]; then
            n=$(sed -n 's/^#\([0-9][0-9]*\)[[:space:]].*/\1/p' "$part" | tail -1)
        fi
        execs=$(( execs + ${n:-0} ))
        if [[ $rc -eq 0 ]]; then
            rm -f "$part"
            break
        fi
        artifact=$(sed -n 's/.*Test unit written to \(\S*\).*/\1/p' "$part" | tail -1)
        kind=$(sed -n 's/^SUMMARY: \(.*\)$/\1/p' "$part" | tail -1)
        panic=$(grep -m1 -A1 'panicked at' "$part" | tr '\n' ' ' | sed 's/  */ /g')
        if [[ -z $artifact && -z $kind ]]; then
            # Not a finding: the build or the run itself failed.
            findings+=("run failed (exit $rc), see fuzz/$log")
            rm -f "$part"
            break
        fi
        findings+=("${kind:-crash}: ${artifact:-?}${panic:+ -- $panic}")
        rm -f "$part"
    done
    if [[ ${#findings[@]} -eq 0 ]]; then
        line=$(printf '%-14s %10d execs  no crash' "$t" "$execs")
    else
        found_any=1
        line=$(printf '%-14s %10d execs  %d finding(s)' "$t" "$execs" "${#findings[@]}")
        for f in "${findings[@]}"; do line+=$'\n'"    $f"; done
    fi
    summary+=("$line")
    echo "$line" >&2
done

echo
echo "== fuzzed ${seconds}s per target"
printf '%s\n' "${summary[@]}"
exit $found_any
