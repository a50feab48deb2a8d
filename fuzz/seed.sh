#!/usr/bin/env bash
# Seed the gguf_parse corpus: the headers (first 32 KiB: all metadata and tensor infos, plus the
# start of the data) of the golden models, and the malformed-file corpus of the gguf tests.
# Usage: fuzz/seed.sh [GOLDEN_DIR]   (default: testdata/golden in the repository)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
golden="${1:-$here/../testdata/golden}"
corpus="$here/corpus/gguf_parse"
mkdir -p "$corpus"
for model in "$golden"/*/model.gguf; do
    name="$(basename "$(dirname "$model")")"
    head -c 32768 "$model" > "$corpus/golden-$name"
done
cp "$here"/../host/gguf/tests/malformed/*.gguf "$corpus"/
ls "$corpus" | wc -l
