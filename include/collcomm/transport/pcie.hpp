// collcomm/transport/pcie.hpp — the PCIe transports' host side, for GPUs that reach each other
// over PCIe only. Two transports, chosen by the user at set-up (all_peers_reachable says which
// fits; the choice is a type, so a direct algorithm over the staged one does not compile):
//
//   transport::pcie         P2P: cudaDeviceCanAccessPeer allows it between every pair of GPUs in
//                           use; connections in the receiver's GPU memory, peers' stores and loads
//                           cross the link directly, the direct algorithms (one_shot, two_shot,
//                           direct) load peers' buffers. CUDA does not say whether a peer link is
//                           PCIe or NVLink; over NVLink this is transport::nvlink's path (system
//                           scope always, even on one GPU).
//   transport::pcie_staged  some pair has no peer access (or, to test it, on one GPU): every
//                           connection's slots, sizes and counters in pinned host memory mapped
//                           into every GPU. The sender's kernel stores its message into host memory
//                           over PCIe, fences at system scope and stores the tail counter; the
//                           receiver's kernel polls the tail with system-scope loads and loads the
//                           message from host memory: every message crosses PCIe twice. Counters
//                           are plain stores and loads, never a remote atomic read-modify-write
//                           (those do not work over PCIe on most hosts). FIFO algorithms only
//                           (ring, tree, recursive_doubling, pairwise, linear, p2p).
//
//   std::vector<int> devices = {0, 0, 1, 1};
//   if (collcomm::transport::all_peers_reachable(devices)) {
//     collcomm::gpu::world w(4, devices);                              // P2P
//     collcomm::communicator<collcomm::transport::pcie> comm(w, rank);
//   } else {
//     collcomm::gpu::options o;
//     o.connections = collcomm::gpu::placement::host;                 // staged
//     collcomm::gpu::world w(4, devices, o);
//     collcomm::communicator<collcomm::transport::pcie_staged> comm(w, rank);
//   }
//
// Cost of the staged path: every ordered pair of ranks gets a connection on every channel:
// n^2 x channels x slots x slot_bytes of pinned host memory (8 ranks, 16 channels, 8 x 256 KiB:
// 2 GiB), pinned at set-up. Across processes, communicator<transport::pcie_staged>(boot, device,
// opts) puts every connection of the world in ONE POSIX shared-memory segment that every rank
// maps and registers (gpu/process_world.hpp); /dev/shm must hold it (docker's default is 64 MiB:
// --shm-size), else join names the size it needs.
//
// Limits, said plainly:
//   - A world is staged or P2P as a whole: a mix (some pairs with peer access) is staged throughout.
//   - A timed-out wait claims its host-mapped stall record with a compare-and-swap, as on nvlink;
//     with GPUs that lack host atomics two simultaneous stalls may both write it (the message may
//     then mix two stalls; the error itself is still raised).
//   - Under MPS a rank killed mid-call ends every process's GPU context: its kernel faults on the
//     host memory it registered as the process goes, and MPS reports a client's fault to all
//     clients; the survivors' communicator::check() names the dead rank.
#pragma once

#include <collcomm/transport/nvlink.hpp>  // all_peers_reachable, enable_peer_access
#include <collcomm/transport/pcie_device.hpp>
#include <collcomm/transport/tags.hpp>
