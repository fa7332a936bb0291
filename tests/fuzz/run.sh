#!/usr/bin/env bash
# tests/fuzz/run.sh — build the bootstrap parsers' libFuzzer target with clang and run it.
#
#   tests/fuzz/run.sh [seconds]     default 180; any further arguments go to libFuzzer
#
# Needs clang with libFuzzer (Debian: apt-get install clang). Builds with AddressSanitizer and
# UndefinedBehaviorSanitizer (any report is a crash), into build-fuzz/ (ignored by git), keeps
# the corpus in build-fuzz/corpus between runs, seeds it with valid messages and ids, and puts
# any crashing input in build-fuzz/artifacts/. Exits non-zero if the fuzzer found a crash.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
seconds="${1:-180}"
shift || true
out="$root/build-fuzz"
mkdir -p "$out/corpus" "$out/artifacts"
cxx="${CLANGXX:-clang++}"
command -v "$cxx" >/dev/null 2>&1 || { echo "run.sh: $cxx not found (Debian: apt-get install clang)" >&2; exit 2; }

"$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root/include" "$root/tests/fuzz/fuzz_wire.cpp" -o "$out/fuzz_wire"

# Seeds: each message type, a two-message stream, both id forms. Layout: flags, nranks-1, bytes.
if command -v python3 >/dev/null 2>&1 && [[ -z "$(ls -A "$out/corpus")" ]]; then
  python3 - "$out/corpus" <<'EOF'
import struct, sys, os
d = sys.argv[1]
tok = 0x5eed5eed12345678
def msg(t, sender, peer, payload):
    return struct.pack('<IHHQiiQ', 0x54424343, 1, t, tok, sender, peer, len(payload)) + payload
seeds = {}
for t in range(1, 8):
    seeds[f'type{t}'] = b'\x00\x07' + msg(t, 1, -1 if t != 5 else 2, b'x' * (t * 3))
seeds['stream'] = b'\x00\x03' + msg(3, 0, -1, b'abcd') + msg(5, 1, 2, b'') + msg(6, 2, -1, b'z')
seeds['hello'] = b'\x01\x03' + msg(1, 2, -1, struct.pack('<I', 4))
idb = struct.pack('<QQH', 0x3144495543434301, tok, 29500) + bytes([9]) + b'127.0.0.1'
seeds['id_bytes'] = b'\x00\x00' + idb + bytes(128 - len(idb))
seeds['id_text'] = b'\x00\x00' + b'127.0.0.1:29500/5eed5eed12345678'
for k, v in seeds.items():
    open(os.path.join(d, k), 'wb').write(v)
EOF
fi

echo "fuzzing the bootstrap parsers for $seconds s"
"$out/fuzz_wire" "$out/corpus" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/artifacts/" \
  -rss_limit_mb=2048 -malloc_limit_mb=256 "$@"
