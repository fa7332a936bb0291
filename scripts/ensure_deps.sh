# shellcheck shell=bash
# scripts/ensure_deps.sh — sourced by scripts/test, scripts/demo and .ci/run.
#
# collcomm_ensure_deps [--build | --tests]: installs, with apt-get (through sudo when not root), the Debian
# packages the build needs and that are missing: cmake, ninja-build, g++ (and with --tests:
# doctest-dev; libibverbs-dev, whose headers the net<ibverbs> tests compile against — the library
# is loaded with dlopen, never linked; iproute2, whose `ip netns` makes the net tests' hosts). The CUDA toolkit (headers and CCCL only; no GPU needed) must already be installed: it is
# looked for on PATH, in $CUDAToolkit_ROOT and in /usr/local/cuda.

collcomm_have_doctest() {
  local d
  for d in /usr/lib/cmake/doctest /usr/local/lib/cmake/doctest /usr/lib/x86_64-linux-gnu/cmake/doctest \
           /usr/local/share/doctest /usr/share/doctest; do
    [[ -f "$d/doctestConfig.cmake" ]] && return 0
  done
  return 1
}

collcomm_ensure_deps() {
  local want_tests=0 missing=()
  [[ "${1:-}" == "--tests" ]] && want_tests=1
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
  command -v g++ >/dev/null 2>&1 || missing+=(g++)
  if (( want_tests )) && ! collcomm_have_doctest; then missing+=(doctest-dev); fi
  if (( want_tests )) && [[ ! -f /usr/include/infiniband/verbs.h ]]; then missing+=(libibverbs-dev); fi
  if (( want_tests )) && ! command -v ip >/dev/null 2>&1; then missing+=(iproute2); fi

  if (( ${#missing[@]} )); then
    echo "collcomm: installing missing packages: ${missing[*]}"
    if ! command -v apt-get >/dev/null 2>&1; then
      echo "collcomm: no apt-get here; please install ${missing[*]} (CMake >= 3.25) yourself" >&2
      return 1
    fi
    local sudo=()
    if [[ "$(id -u)" != 0 ]]; then
      command -v sudo >/dev/null 2>&1 || { echo "collcomm: need root or sudo to install ${missing[*]}" >&2; return 1; }
      sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi

  # CMake's FindCUDAToolkit looks on PATH and in /usr/local/cuda; say so early when neither has it.
  if ! command -v nvcc >/dev/null 2>&1 && [[ -z "${CUDAToolkit_ROOT:-}" ]]; then
    if [[ -x /usr/local/cuda/bin/nvcc ]]; then
      export CUDAToolkit_ROOT=/usr/local/cuda
    else
      echo "collcomm: the CUDA toolkit (12.x or 13.x) is needed for its headers and CCCL, and was not found" >&2
      echo "          on PATH or in /usr/local/cuda; set CUDAToolkit_ROOT to where it is installed." >&2
      return 1
    fi
  fi
}

# collcomm_ensure_mpi: Debian's Open MPI (openmpi-bin, libopenmpi-dev), if mpicxx or mpirun is
# missing, for the mpi bootstrap's test and example (built only where CMake finds MPI). CI calls it.
collcomm_ensure_mpi() {
  command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || { echo "collcomm: no apt-get; the mpi bootstrap test will not be built" >&2; return 0; }
  local sudo=()
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "collcomm: need root or sudo to install Open MPI" >&2; return 1; }
    sudo=(sudo)
  fi
  echo "collcomm: installing openmpi-bin libopenmpi-dev"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev
}
