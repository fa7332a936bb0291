// collcomm/bootstrap/bootstrap.hpp — what a bootstrap is: the out-of-band channel that ranks use
// once, at set-up, to exchange small things (addresses, IPC handles, queue-pair numbers).
//
// Contract of a type B modelling collcomm::bootstrap::bootstrap_like:
//   b.rank(), b.size()   this process's rank in [0, size) and the number of ranks (size >= 1).
//   b.all_gather(in, out)  collective: every rank gives `in` (the same number of bytes n on every
//                        rank) and gets out[r*n, (r+1)*n) = rank r's `in` for every r;
//                        out.size() must be size()*n. A rank giving another n is an error on
//                        every rank.
//   b.barrier()          collective: returns on a rank only after every rank has entered it.
//   b.send(peer, bytes)  point to point; may return before the peer receives (buffered).
//   b.recv(peer, bytes)  receives the next message that `peer` sent to this rank; its size must
//                        be bytes.size() exactly (else an error). Messages from one peer arrive
//                        in the order sent.
// Collectives are called by every rank in the same order. Every wait is bounded by the
// bootstrap's timeout; running out throws collcomm::error{errc::timeout} naming the ranks that did
// not arrive. Every failure throws collcomm::error (error.hpp), never hangs. The bootstrap is
// meant for small messages (kilobytes to a few MiB); it is not a data path.
// Destruction releases every socket and file descriptor.
//
// Limits shared by every bootstrap: at most max_ranks ranks (checked, naming the argument, before
// anything is allocated for them) and messages of at most max_payload bytes (a send or an
// all_gather result over it is refused on the sender, errc::invalid_argument, and the bootstrap
// stays usable).
//
// This folder (bootstrap/): local (threads), tcp (unique id), env (torchrun / Open MPI / Slurm),
// mpi (adapter), and the bounded wire parser they share. It includes config and error only.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace bootstrap {

template <class B>
concept bootstrap_like = requires(B& b, const B& cb, std::span<const std::byte> in, std::span<std::byte> out,
                                  int peer) {
  { cb.rank() } -> std::convertible_to<int>;
  { cb.size() } -> std::convertible_to<int>;
  b.all_gather(in, out);
  b.barrier();
  b.send(peer, in);
  b.recv(peer, out);
};

// The most ranks a bootstrap takes: the largest world (host::world::max_ranks).
inline constexpr int max_ranks = 1024;
// The most bytes one message (a send, an all_gather result) may carry.
inline constexpr std::uint64_t max_payload = std::uint64_t{64} << 20;

namespace detail {

// Throws errc::invalid_argument unless `nranks` (the value of argument `name`) is in [1, max_ranks].
inline void check_nranks(std::string_view where, std::string_view name, long long nranks) {
  if (nranks < 1 || nranks > max_ranks)
    collcomm::detail::fail(errc::invalid_argument, where, no_rank,
                           std::string(name) + " = " + std::to_string(nranks) + " is out of range [1, " +
                               std::to_string(max_ranks) + "] (bootstrap::max_ranks)");
}

// Throws errc::invalid_argument if a message of `bytes` bytes exceeds max_payload.
inline void check_payload(std::string_view where, int rank, std::string_view what, std::uint64_t bytes) {
  if (bytes > max_payload)
    collcomm::detail::fail(errc::invalid_argument, where, rank,
                           std::string(what) + " of " + std::to_string(bytes) + " bytes exceeds the bound of " +
                               std::to_string(max_payload) + " bytes (64 MiB, bootstrap::max_payload)");
}

// "rank 3", "ranks 1, 4-9, 12" or, past `max_runs` runs, "ranks 1, 3, ... (and 5000 more)"; `r`
// ascending. Keeps errors about a large world short.
inline std::string ranks_text(const std::vector<int>& r, std::size_t max_runs = 16) {
  std::string s = r.size() == 1 ? "rank " : "ranks ";
  std::size_t i = 0, runs = 0;
  while (i < r.size() && runs < max_runs) {
    std::size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    s += (runs ? ", " : "") + std::to_string(r[i]);
    if (j > i) s += (j == i + 1 ? ", " : "-") + std::to_string(r[j]);
    i = j + 1;
    ++runs;
  }
  if (i < r.size()) s += " (and " + std::to_string(r.size() - i) + " more)";
  return s;
}

}  // namespace detail

}  // namespace bootstrap
COLLCOMM_NAMESPACE_END
