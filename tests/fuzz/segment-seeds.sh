#!/bin/bash
# segment-seeds.sh FAKESEG DIR — write fuzz_segment's seeds: segments made by the fakeseg
# helper (1 and 3 arenas, valid and deliberately broken modes), each behind the fuzzer's
# mode byte (0: read as is, 9: also drive the mailbox, 1/2: shrink/grow under the reader).
set -euo pipefail
fakeseg=$1 out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 700 "$tmp"
rm -rf "$out" && mkdir -p "$out"
i=0
for spec in "valid 1 0" "valid 3 9" "valid 1 1" "valid 1 2" "valid 2 13" "offsets-oob 1 0" \
	"counts 1 0" "bad-version 1 0" "bad-header 1 0"; do
	read -r mode arenas flag <<<"$spec"
	rm -f "$tmp"/*
	"$fakeseg" --dir "$tmp" --mode "$mode" --arenas "$arenas" --ready "$tmp/ready" 2>/dev/null &
	pid=$!
	for _ in $(seq 100); do [ -e "$tmp/ready" ] && break; sleep 0.02; done
	seg=$(ls "$tmp"/liballoc.*.seg 2>/dev/null | head -n 1)
	if [ -n "$seg" ]; then
		{ printf "\\x$(printf %02x "$flag")"; cat "$seg"; } >"$out/$mode-$arenas-$flag"
		i=$((i + 1))
	fi
	kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
done
echo "segment-seeds: $i files in $out"
