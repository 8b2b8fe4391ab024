#!/usr/bin/env bash
# Fills fuzz/corpus/<target>/ with seed inputs taken from fixtures/.
# Usage: fuzz/seed.sh        (from anywhere; re-running adds what is missing)
#
# Files are copied under a name that keeps their origin (slashes become
# '__'), so a corpus entry can be traced back to its fixture. Inputs saved
# under fixtures/malformed/fuzz/ (regressions) go to their target's corpus
# too. The corpus is not committed (see .gitignore).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
fixtures="$root/fixtures"
corpus="$here/corpus"
# Node-suite models and tensors above this size are left out: libFuzzer's
# default maximum input length follows the largest seed, and small inputs
# mutate faster.
max_node_bytes=$((64 * 1024))
# How many node-suite cases to take (the directory has ~1900).
node_sample=${NODE_SAMPLE:-300}

targets=(onnx_check torch_archive torch_irtext torch_code rows tensor_file)
for t in "${targets[@]}"; do mkdir -p "$corpus/$t"; done

# add TARGET FILE [NAME]: copies FILE into the target's corpus.
add() {
    local target=$1 file=$2 name=${3:-}
    [[ -f $file ]] || return 0
    if [[ -z $name ]]; then
        name=${file#"$fixtures/"}
        name=${name//\//__}
    fi
    cp -f "$file" "$corpus/$target/$name"
}

# small FILE: whether FILE is at most max_node_bytes long.
small() { [[ $(stat -c %s "$1") -le $max_node_bytes ]]; }

shopt -s nullglob globstar

# onnx_check: hand-written fixtures, then a spread sample of the node suite.
for f in "$fixtures"/light/*.onnx "$fixtures"/check/*.onnx "$fixtures"/diagnostics/*.onnx \
    "$fixtures"/ops-extra/**/*.onnx "$fixtures"/synthetic/**/*.onnx; do
    small "$f" && add onnx_check "$f"
done
node_models=("$fixtures"/onnx-node/*/model.onnx)
step=$(( ${#node_models[@]} / node_sample ))
(( step >= 1 )) || step=1
for (( i = 0; i < ${#node_models[@]}; i += step )); do
    f=${node_models[i]}
    small "$f" && add onnx_check "$f"
done

# torch_archive: the archives, the corrupt ones included (zip bomb, path
# traversal, truncated, ...).
for f in "$fixtures"/torch/*.pt "$fixtures"/torch/corrupt/*.pt; do
    add torch_archive "$f"
done

# torch_irtext: the IR dumps.
for f in "$fixtures"/torch/*.ir.txt; do
    add torch_irtext "$f"
done

# torch_code: the code/**.py entries of the archives (not the corrupt ones:
# their code is the same as the good ones', or absent).
if command -v unzip > /dev/null; then
    extract() { unzip -Z1 "$1" 2> /dev/null | grep -E '/code/.*\.py$' || true; }
    unpack() { unzip -p "$1" "$2"; }
else
    extract() {
        python3 -c 'import sys, zipfile
for n in zipfile.ZipFile(sys.argv[1]).namelist():
    if "/code/" in n and n.endswith(".py"): print(n)' "$1" 2> /dev/null || true
    }
    unpack() { python3 -c 'import sys, zipfile
sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' "$1" "$2"; }
fi
for pt in "$fixtures"/torch/*.pt; do
    base=$(basename "$pt" .pt)
    while IFS= read -r entry; do
        [[ -n $entry ]] || continue
        name="$base@${entry//\//__}"
        unpack "$pt" "$entry" > "$corpus/torch_code/$name"
    done < <(extract "$pt")
done

# rows: the constraint files.
for f in "$fixtures"/rows/*.rows; do
    add rows "$f"
done

# tensor_file: the .npy fixtures (the torch ones are small too) and some
# node-suite TensorProto inputs.
for f in "$fixtures"/npy/*.npy "$fixtures"/torch/*.npy; do
    small "$f" && add tensor_file "$f"
done
node_inputs=("$fixtures"/onnx-node/*/test_data_set_0/input_0.pb)
step=$(( ${#node_inputs[@]} / 100 ))
(( step >= 1 )) || step=1
for (( i = 0; i < ${#node_inputs[@]}; i += step )); do
    f=${node_inputs[i]}
    small "$f" && add tensor_file "$f"
done

# Regression inputs found by earlier runs: fixtures/malformed/fuzz/<target>-<name>.
for f in "$fixtures"/malformed/fuzz/*; do
    name=$(basename "$f")
    for t in "${targets[@]}"; do
        if [[ $name == "$t"-* ]]; then add "$t" "$f" "regression-$name"; fi
    done
done

for t in "${targets[@]}"; do
    printf '%-14s %5d files %8d KiB\n' "$t" "$(find "$corpus/$t" -type f | wc -l)" \
        "$(du -sk "$corpus/$t" | cut -f1)"
done
