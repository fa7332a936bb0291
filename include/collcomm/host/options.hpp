// collcomm/host/options.hpp — the knobs of a host world (ranks as threads of one process, or as
// processes: process_world.hpp).
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/options.hpp>

#include <chrono>
#include <cstddef>

COLLCOMM_NAMESPACE_BEGIN
namespace host {

// Checked when a world is made (host::world throws errc::invalid_argument naming the field):
// the shared rules (collcomm/options.hpp), then the host's below.
struct options : common_options {
  options() {
    // Channels each collective is split over. Every channel has its own connections and barrier;
    // on the host a rank runs its channels one after the other, so more channels exercise the
    // schedules' channel split rather than add parallelism (each costs a message and a wait per
    // step: bench/RESULTS.md, "Host executor beside Open MPI"). In [1, 64].
    channels = 1;
    // Bytes of one connection slot: the largest FIFO message. slot_elems() of element T is
    // slot_bytes / sizeof(T), rounded down to align_elems() = max(1, 16 / sizeof(T)). 64 KiB
    // messages run the ring 1.4-2.4x faster than 4 KiB ones from 128 KiB (same section). A world
    // of threads touches a slot's pages only when a message uses it; a world of processes holds
    // nranks^2 x channels x slots x slot_bytes in /dev/shm (8 ranks: 32 MiB).
    slot_bytes = std::size_t{64} << 10;
    slots = 8;
    // A wait that runs out throws collcomm::error(errc::timeout) naming the waiting rank, the
    // peer, the channel and what was awaited.
    timeout = std::chrono::milliseconds(30000);
    // Process worlds only (process_world.hpp): each rank's window in the shared segment; a direct
    // call whose input and output together need more throws errc::invalid_argument naming this
    // option. Every page of the segment is allocated when the world is made (a full /dev/shm is an
    // error then, never a SIGBUS later), so /dev/shm must hold every rank's whole window and the
    // world holds it in memory for its life: 16 MiB per rank, 128 MiB for 8 ranks (docker's
    // default 64 MiB /dev/shm does not suffice for several ranks: --shm-size, or a smaller window).
    // The default takes two_shot and one_shot to 8 MiB buffers in and out of place. >= 4096.
    window_bytes = std::size_t{16} << 20;
  }
  // How long a waiting rank polls before it yields and then sleeps on its doorbell (0: 64
  // pauses). Negative: automatic — 200 µs where the world's ranks have a CPU each (see `cpus`),
  // else 1 ms. COLLCOMM_HOST_SPIN_US (microseconds) overrides either. Where ranks outnumber the
  // CPUs, a polling rank yields after every look, so that it gives its CPU to the rank that holds
  // the work (detail/wait.hpp). Ranks may differ.
  std::chrono::microseconds spin{-1};
  // The CPUs the world's ranks share, which decides how they wait (`spin`). 0: automatic — for
  // threads, the CPUs this process may run on; for processes, those any rank may run on (a
  // launcher that binds each rank to a core gives each a mask of one). >= 0.
  int cpus = 0;
  // host::run_ranks binds each rank's thread to a CPU of its own among those this process may run
  // on, where every rank has one (as mpirun binds processes to cores; worlds that run at once take
  // the CPUs in turn); where ranks outnumber those CPUs it binds none.
  // Unbound, the scheduler at times kept two polling rank threads on one CPU while another idled,
  // for the life of the threads (2 threads, 8-byte all_reduce: 2.0 instead of 0.33 µs per call).
  bool bind_threads = true;
};

}  // namespace host
COLLCOMM_NAMESPACE_END
