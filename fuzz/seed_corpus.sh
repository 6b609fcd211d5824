#!/usr/bin/env bash
# Seeds fuzz/corpus/<target>/ from the repository's fixtures (nothing here is
# committed: corpus/ is ignored). Run from anywhere; re-running adds nothing new.
#   graphdef_binary  <- every .pb GraphDef (tests/fixtures, graph/tests/fixtures)
#   graphdef_text    <- every .pbtxt
#   npy              <- every .npy
#   checkpoint       <- the checkpoints tests/mutation.rs mutates, each twice: prefixed
#                       with the mode byte the target reads (0: as is, 1: resealed)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
corpus="$root/fuzz/corpus"
mkdir -p "$corpus"/{graphdef_binary,graphdef_text,npy,checkpoint}

copy() { # copy <find pattern> <target>
  find "$root/tests/fixtures" "$root/graph/tests/fixtures" "$root/data" \
       -type f -name "$1" -size -1M 2>/dev/null |
  while read -r f; do
    # One file per distinct content, named by its hash, as libFuzzer does.
    h="$(sha1sum "$f" | cut -c1-40)"
    cp -n "$f" "$corpus/$2/$h"
  done
}
copy '*.pb' graphdef_binary
copy '*.pbtxt' graphdef_text
copy '*.npy' npy

# Checkpoints: the mutation test's writer makes them (tests/mutation.rs writes its
# seeds to $ACTORFLOW_CKPT_SEEDS when that is set).
seeds="$(mktemp -d)"
trap 'rm -rf "$seeds"' EXIT
(cd "$root" && ACTORFLOW_CKPT_SEEDS="$seeds" cargo test --test mutation -- checkpoint_seeds --exact >/dev/null)
for f in "$seeds"/*; do
  h="$(sha1sum "$f" | cut -c1-40)"
  { printf '\0'; cat "$f"; } > "$corpus/checkpoint/0$h"
  { printf '\1'; cat "$f"; } > "$corpus/checkpoint/1$h"
done
for t in graphdef_binary graphdef_text npy checkpoint; do
  echo "$t: $(ls "$corpus/$t" | wc -l) seeds"
done
