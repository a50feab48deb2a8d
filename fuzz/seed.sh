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
# The f32 models are committed as xz-compressed byte planes (testdata/src/derive.rs, unxz_planes).
for packed in "$golden"/*/model.gguf.planes.xz; do
    name="$(basename "$(dirname "$packed")")"
    python3 - "$packed" "$corpus/golden-$name" <<'EOF'
import lzma, sys
planes = lzma.decompress(open(sys.argv[1], "rb").read())
words = len(planes) // 4
out = bytearray(len(planes))
for k in range(4):
    out[k:words * 4:4] = planes[k * words:(k + 1) * words]
out[words * 4:] = planes[words * 4:]
open(sys.argv[2], "wb").write(bytes(out[:32768]))
EOF
done
cp "$here"/../host/gguf/tests/malformed/*.gguf "$corpus"/
ls "$corpus" | wc -l
