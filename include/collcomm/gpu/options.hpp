// collcomm/gpu/options.hpp — the GPU executor's options: one value type for every GPU world
// (ranks as threads, ranks as processes), checked without side effects, and the one place where
// the GPU executor reads environment variables.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/options.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <string>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {

// Where a world's connections live (options::connections).
enum class placement {
  device,  // in the receiver's GPU memory: one GPU, or peers with peer access (NVLink, P2P over PCIe):
           // transport::nvlink and transport::pcie
  host,    // pinned host memory mapped into every GPU (cudaHostAlloc mapped | portable): every message
           // crosses PCIe twice (sender GPU -> host, host -> receiver GPU); no peer access needed;
           // ordering at system scope: transport::pcie_staged
};

enum class launch_mode {
  grouped,   // one launch per GPU per call for all of its ranks (the default; gpu/launch.hpp says why)
  per_rank,  // every rank launches alone: only for one rank per GPU
};

// The shared fields (collcomm/options.hpp) with the GPU's defaults, and the GPU's own.
struct options : common_options {
  options() {
    // Thread blocks per rank and call; 0: SMs / ranks per GPU, at most 32 (a world of threads: at
    // most 64, and 128 / ranks where that is more than 32).
    channels = 0;
    // Connections take, in each rank's GPU memory, nranks x channels x slots x slot_bytes (8 ranks,
    // 16 channels, 8 x 256 KiB: 256 MiB per rank; with automatic channels it stays at a few hundred
    // MiB per rank); 1 MiB slots reach ~80 % of copy bandwidth on one H200 (bench/RESULTS.md),
    // 256 KiB ~75 %.
    slot_bytes = std::size_t{256} << 10;
    slots = 8;                                   // a power of two, at least 2
    timeout = std::chrono::milliseconds(10000);  // also bounds the launch rendezvous
    // Worlds of processes only (gpu/process_world.hpp): each rank's staging window for direct
    // algorithms, four times over in its GPU memory (input and output of calls staged by copies;
    // two alternating halves for calls that stage in the kernel). A direct call whose input or
    // output is larger is refused; 0 refuses every direct call. A multiple of 256.
    window_bytes = std::size_t{32} << 20;
  }
  launch_mode launch = launch_mode::grouped;
  bool cooperative = true;  // grouped launches are cooperative (all blocks resident, or an error)
  // True: a rank that launches alone (a world of processes, or one rank per GPU) launches its
  // kernels as programmatic dependents of the stream's previous kernel (kernels built for compute
  // capability 9.0 or later): a kernel is placed while the previous one ends and waits, before its
  // first load or store, for it to complete and its writes to be visible (gpu/launch.hpp; a
  // user's kernel launched programmatically between two calls must execute
  // cudaGridDependencySynchronize too, even one that reads nothing the call wrote). Among 8
  // processes on an H100 it takes 0.9 µs off a small all_reduce replayed from a graph and 8 µs off
  // one launched on a stream (bench/RESULTS.md).
  bool programmatic_launch = true;
  // How long a rank waiting for its GPU's grouped launch polls before it sleeps until the launch:
  // a sleeping thread's wake-up can cost more than a call. Negative: 200 µs, yielding every
  // microsecond, where the GPU's ranks have a CPU each, else 1 ms, yielding after every look.
  std::chrono::microseconds rendezvous_spin{-1};
  placement connections = placement::device;
};

// Throws errc::invalid_argument naming the first bad option (or nranks) and the rank.
inline void check_options(int nranks, const options& opts, const char* where, int rank) {
  if (nranks < 1)
    detail::fail(errc::invalid_argument, where, rank,
                 "argument 'nranks' is " + std::to_string(nranks) + "; it must be at least 1");
  check_common_options(opts, where, rank);
  // A block waits for its message and its free send slot together: 2 slots keep a ring moving.
  if (opts.slots < 2 || (opts.slots & (opts.slots - 1)) != 0)
    detail::fail(errc::invalid_argument, where, rank,
                 "option 'slots' = " + std::to_string(opts.slots) + " must be a power of two, at least 2");
  if (opts.window_bytes % 256 != 0)
    detail::fail(errc::invalid_argument, where, rank,
                 "option 'window_bytes' = " + std::to_string(opts.window_bytes) + " must be a multiple of 256");
}

// The environment variables the GPU executor reads, all of them, applied to the options a world
// is made with (gpu::world, gpu::world::join):
//   COLLCOMM_GPU_COOPERATIVE=0   grouped launches are not cooperative (options::cooperative = false)
//   COLLCOMM_GPU_RENDEZVOUS_SPIN_US=N   options::rendezvous_spin = N microseconds
//   COLLCOMM_GPU_PROGRAMMATIC_LAUNCH=0   options::programmatic_launch = false (1: true)
inline options with_environment(options opts) {
  if (const char* coop = std::getenv("COLLCOMM_GPU_COOPERATIVE")) opts.cooperative = std::atoi(coop) != 0;
  if (const char* pdl = std::getenv("COLLCOMM_GPU_PROGRAMMATIC_LAUNCH")) opts.programmatic_launch = std::atoi(pdl) != 0;
  if (const char* spin = std::getenv("COLLCOMM_GPU_RENDEZVOUS_SPIN_US"); spin != nullptr && *spin != '\0')
    opts.rendezvous_spin = std::chrono::microseconds(std::max(0L, std::strtol(spin, nullptr, 10)));
  return opts;
}

}  // namespace gpu
COLLCOMM_NAMESPACE_END
