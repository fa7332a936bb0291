// collcomm/gpu/stall.hpp — turning what a GPU world's kernels recorded into an error: a
// timed-out wait (who waited for whom, on which channel and message), a rank whose process is
// gone, a GPU context that failed. communicator::check() calls it after the stream synchronized.
#pragma once

#include <collcomm/detail/join.hpp>
#include <collcomm/error.hpp>
#include <collcomm/gpu/world.hpp>
#include <collcomm/transport/device_handle.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {

// Throws the stall that any rank of the world recorded, if one did: a timed-out wait ends every
// rank's call (the world's abort word), so every rank reports the first stall — who waited, for
// which peer, on which channel and message. Call after the rank's stream synchronized.
// Whether `e` is an error that leaves this process's GPU context failed (sticky).
inline bool context_failed(cudaError_t e) noexcept {
  return e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorMisalignedAddress ||
         e == cudaErrorIllegalInstruction || e == cudaErrorHardwareStackError || e == cudaErrorInvalidPc ||
         e == cudaErrorInvalidAddressSpace || e == cudaErrorMpsClientTerminated;
}

inline void check_stall(world& w, int rank) {
  if (w.is_process()) {  // a net world's rank too (its process_view names its rank)
    // A GPU context that failed (a sticky CUDA error, left by the stream synchronization before
    // this call). Under MPS, a fatal fault of any client is reported to every client of the GPU,
    // and a client SIGKILLed while its kernel reads host memory it registered (transport::pcie's
    // staged connections) faults as its mappings go: name the rank whose process is gone.
    const cudaError_t e = cudaPeekAtLastError();
    if (context_failed(e)) {
      std::string msg = std::string("this process's GPU context failed (") + cudaGetErrorString(e) + ")";
      // The fault can arrive while the dead process is still being torn down (its liveness lock
      // not yet released: seen 180 ms after the kill): look again for up to the timeout (at most
      // 5 s: a context can also fail for reasons of its own, a user's kernel for one).
      std::vector<int> dead;
      const auto until = std::chrono::steady_clock::now() +
                         std::min<std::chrono::steady_clock::duration>(w.opts().timeout, std::chrono::seconds(5));
      while ((dead = w.dead_ranks()).empty() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!dead.empty())
        msg += "; the process of rank(s) " + detail::rank_list(dead) +
               " is gone (killed or exited): under MPS a client that dies during a call can fault every client of the "
               "GPU; this process must exit to use CUDA again";
      w.mark_failed(msg);
      detail::fail(errc::system, "gpu collective", rank, msg);
    }
  }
  // A net world's host group that a rank ended (its proxy failed, or abort()): that reason first.
  // The kernels it cut short leave messages that later calls of other ranks read as another
  // call's, which the records would report as a disagreement.
  if (!w.group_failure().empty()) w.check_usable("gpu collective", rank);
  transport::stall_record s{};
  auto scan = [&] {
    for (int r = 0; r < w.size() && !s.stalled; ++r) {
      s = w.stall_of((rank + r) % w.size());  // this rank's own record first
      if (s.stalled == 2) {                   // being written: it is a few stores from done
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        s = w.stall_of((rank + r) % w.size());
      }
    }
  };
  scan();
  if (!s.stalled && w.is_process()) {
    // A world of processes: abort() ends kernels without a stall record; a timed-out wait raises
    // the abort word just before it claims its record, so give that record a moment to appear.
    if (w.shared_abort_word() == 2 || (w.process().resources && w.process().resources->raised()))
      w.check_usable("gpu collective", rank);  // errc::aborted
    for (int i = 0; i < 100 && !s.stalled && w.shared_abort_word() != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      scan();
    }
    if (!s.stalled) w.check_usable("gpu collective", rank);
  }
  if (!s.stalled && w.has_near() && w.shared_abort_word() != 0) {
    // A net world's host group: a wait of another rank of the group timed out (its record is in
    // that rank's process) or one of the group's proxies failed, and this rank's call ended with it.
    if (w.shared_abort_word() == 2) w.check_usable("gpu collective", rank);  // errc::aborted, with the reason
    std::string msg = "a wait of another rank of this host timed out; this rank's call was abandoned with it";
    if (const auto dead = w.dead_ranks(); !dead.empty())
      msg += "; the process of rank(s) " + detail::rank_list(dead) + " is gone (killed or exited)";
    w.mark_failed(msg);
    detail::fail(errc::timeout, "gpu collective", rank, msg);
  }
  if (!s.stalled) return;
  if (s.what == transport::stall_call) {
    auto hex_of = [](std::uint32_t fingerprint) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "%08x", fingerprint);
      return std::string(hex);
    };
    auto name = [&](int r, std::uint32_t fingerprint) {
      world::launched_call c;
      if (!w.find_launch(r, fingerprint, c))
        return "rank " + std::to_string(r) + "'s call of fingerprint " + hex_of(fingerprint);
      return world::describe(c.call) + (c.call.p2p ? "" : " (its collective call #" + std::to_string(c.seq) + ")");
    };
    const bool barrier = s.peer == no_peer;  // direct schedules: a barrier some rank reached in another call
    std::string msg = "rank " + std::to_string(s.rank) +
                      (barrier ? " met a rank making another call at a barrier"
                               : " received a message of another call from rank " + std::to_string(s.peer)) +
                      " (channel " + std::to_string(s.channel) + (barrier ? ", barrier " : ", message ") +
                      std::to_string(s.step) + "): " + name(s.rank, s.call) +
                      (barrier ? ", the other call " + std::string("of fingerprint ") : ", the message from ") +
                      (barrier ? hex_of(s.peer_call) : name(s.peer, s.peer_call)) +
                      ": the ranks disagree about the call (its collective, algorithm, protocol, element type, op, "
                      "count, root or tuning, or the calls made before it)";
    if (s.rank != rank) msg += "; this rank's call was abandoned with it";
    w.mark_failed(msg);
    detail::fail(errc::invalid_argument, "gpu collective", rank, msg);
  }
  const char* what = s.what == transport::stall_recv        ? "a message from"
                     : s.what == transport::stall_send_slot ? "a free slot towards"
                     : s.what == transport::stall_size
                         ? "a message of the expected size (counts differ across ranks) from"
                         : "the barrier";
  std::string msg = std::string("rank ") + std::to_string(s.rank) + " timed out waiting for " + what;
  if (s.peer != no_peer) msg += " rank " + std::to_string(s.peer);
  msg += " (channel " + std::to_string(s.channel) + ", step " + std::to_string(s.step) + ")";
  if (s.rank != rank) msg += "; this rank's call was abandoned with it";
  if (w.is_process()) {
    // A peer's process that ended (killed, crashed) is the likely cause: name it.
    const std::vector<int> dead = w.dead_ranks();
    if (!dead.empty()) msg += "; the process of rank(s) " + detail::rank_list(dead) + " is gone (killed or exited)";
  }
  w.mark_failed(msg);
  detail::fail(s.what == transport::stall_size ? errc::invalid_argument : errc::timeout, "gpu collective", rank, msg);
}

}  // namespace gpu
COLLCOMM_NAMESPACE_END
