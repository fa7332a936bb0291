// tests/gpu/schedule_cases.cuh — the schedule sweeps of the GPU tests, each over one group of
// schedules G (gpu_harness.cuh, schedule_groups: reducing, moving, rooted, and fifo<G> for a
// FIFO-only transport). A test translation unit instantiates one group, so that none compiles
// every kernel; the test_gpu_sched_*, test_gpu_ll_* and test_gpu_pcie_* files together cover
// every kind (test_gpu_ll128_* for protocol ll128). f32 throughout, sum for the kinds that reduce; every output element checked.
#pragma once

#include "gpu_harness.cuh"

#include <chrono>
#include <cstddef>

namespace collcomm_gpu_test {

// Every schedule of G on N = 1..5, 8, 16 ranks of one GPU (2 channels, 1 from 16 ranks), 4 KiB
// slots, every sweep count, in and out of place, roots 0 and N-1.
template <class G>
void every_schedule_f32() {
  for (int n : {1, 2, 3, 4, 5, 8, 16}) {
    gpu::options o;
    o.channels = n <= 8 ? 2 : 1;
    o.slot_bytes = 4096;  // small slots: large counts take many slices
    gpu::world w(n, {}, o);
    run_schedules<G>(w, sweep{sweep_counts(n), 1, true, "simple"});
  }
}

// Calls queued back to back on every rank's stream with no host barrier between them (20 per
// rank, 8 ranks, out of place, root 0): the pattern of a training step, which stalled when each
// rank launched alone.
template <class G>
void twenty_calls_queued() {
  gpu::options o;
  o.channels = 2;
  o.slot_bytes = 4096;
  o.timeout = std::chrono::milliseconds(2000);
  gpu::world w(8, {}, o);
  run_schedules<G>(w, sweep{{index_t{1031}, index_t{40009}}, 20, false, "simple"});
}

// A line protocol (ll, ll128): every schedule of G on N = 1, 2, 3, 4, 8 ranks, small slots
// (4 KiB: 255 ll data lines, ~1 KiB of f32 per message; 31 ll128 lines, 930 f32) so that many
// messages flow and slots are reused many times per call; 20 calls queued per rank out of place,
// once in place.
template <class G, class Protocol = protocol::ll>
void every_schedule_ll() {
  for (int n : {1, 2, 3, 4, 8}) {
    gpu::options o;
    o.channels = 2;
    o.slot_bytes = 4096;
    o.timeout = std::chrono::milliseconds(5000);
    gpu::world w(n, {}, o);
    run_schedules<G, tuning<Protocol>>(w, sweep{sweep_counts(n), 20, true, Protocol::name});
  }
}

// The options of a world whose connections are staged through pinned host memory (transport::pcie
// forced on the one GPU of the test machine: every message goes GPU -> host -> GPU over PCIe).
inline gpu::options staged_options(int channels = 2) {
  gpu::options o;
  o.channels = channels;
  o.slot_bytes = 4096;  // small slots: large counts take many messages, slots are reused often
  o.timeout = std::chrono::milliseconds(5000);
  o.connections = gpu::placement::host;
  return o;
}

// Staged through host memory: every FIFO schedule of G (direct ones need load/store access to
// peers) on N = 1, 2, 3, 4, 8 ranks, every sweep count, in and out of place, roots 0 and N-1.
template <class G>
void every_fifo_schedule_staged() {
  for (int n : {1, 2, 3, 4, 8}) {
    gpu::world w(n, {}, staged_options());
    run_schedules<schedule_groups::fifo<G>>(w, sweep{sweep_counts(n), 1, true, "staged"});
  }
}

// Staged: 20 calls queued per rank out of place (once in place), every FIFO schedule of G, 8 ranks.
template <class G>
void twenty_calls_queued_staged() {
  gpu::world w(8, {}, staged_options());
  run_schedules<schedule_groups::fifo<G>>(w, sweep{{index_t{1031}, index_t{40009}}, 20, true, "staged"});
}

}  // namespace collcomm_gpu_test
