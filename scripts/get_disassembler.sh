#!/bin/bash
# Puts cuobjdump and nvdisasm into .deps/tools (git-ignored): this machine's CUDA toolkit has no
# disassembler; Triton's wheel carries both (CUDA 13.1's, which read sm_90 cubins and executables).
#   scripts/get_disassembler.sh
#   .deps/tools/nvdisasm -c some.cubin        (a cubin: nvcc -cubin -arch=sm_90 ...)
#   .deps/tools/cuobjdump --dump-sass a.out
set -e
cd "$(dirname "$0")/.."
[ -x .deps/tools/nvdisasm ] && [ -x .deps/tools/cuobjdump ] && { echo "already in .deps/tools"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --no-deps --quiet triton -d "$tmp"
mkdir -p .deps/tools
python3 - "$tmp" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "triton-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        base = os.path.basename(name)
        if base in ("cuobjdump", "nvdisasm") and "/bin/" in name:
            with open(os.path.join(".deps/tools", base), "wb") as f:
                f.write(z.read(name))
PY
chmod +x .deps/tools/cuobjdump .deps/tools/nvdisasm
.deps/tools/nvdisasm --version | tail -1
