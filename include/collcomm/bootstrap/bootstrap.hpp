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
// This folder (bootstrap/): local (threads), tcp (unique id), env (torchrun / Open MPI / Slurm),
// mpi (adapter), and the bounded wire parser they share. It includes config and error only.
#pragma once

#include <collcomm/config.hpp>

#include <concepts>
#include <cstddef>
#include <span>

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

}  // namespace bootstrap
COLLCOMM_NAMESPACE_END
