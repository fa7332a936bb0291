// collcomm/communicator.hpp — communicator<Transport>: one rank's handle on a group of ranks.
//
// Every transport specializes communicator<Transport> with the same few members, which the host
// API (collectives.hpp) relies on:
//   int rank() const, int size() const
//   template <class K, class Algo, class T, class Op>
//   void run(const coll_args& a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op)
//       runs schedule Algo for kind K on this rank: a carries count, root and peers (rank, nranks,
//       channel and nchannels are filled in here); in_elems / out_elems are the elements of each
//       buffer that are significant on this rank (0 where a buffer is ignored, e.g. reduce's
//       output off the root). Arguments are already checked (collectives.hpp does it).
//
// This header defines the host executor's: communicator<transport::host_shm> over a host::world,
// ranks as threads of one process. It runs a call's channels one after the other on the calling
// thread; every rank runs them in the same order, so the channels cannot deadlock each other.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/host/primitives.hpp>
#include <collcomm/host/world.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/transport/tags.hpp>

#include <string>

COLLCOMM_NAMESPACE_BEGIN

template <class Transport>
class communicator;  // specialized per transport

template <>
class communicator<transport::host_shm> {
 public:
  using transport_type = transport::host_shm;

  // Rank `rank` of world w. Throws errc::invalid_argument when rank is not in [0, w.size()).
  // w must outlive the communicator. One thread at a time drives a rank.
  communicator(host::world& w, int rank) : w_(&w), rank_(rank) {
    if (rank < 0 || rank >= w.size())
      detail::fail(errc::invalid_argument, "communicator", rank,
                   "argument 'rank' = " + std::to_string(rank) + " is out of range [0, " + std::to_string(w.size()) +
                       ") for a host world of " + std::to_string(w.size()) + " ranks");
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return w_->size(); }
  host::world& host_world() const noexcept { return *w_; }

  template <class K, class Algo, class T, class Op>
  void run(const coll_args& a, const T* in, index_t in_elems, T* out, index_t out_elems, const Op& op) const {
    w_->check_usable(K::name, rank_);
    const int nc = w_->opts().channels;
    for (int c = 0; c < nc; ++c) {
      coll_args ca = a;
      ca.rank = rank_;
      ca.nranks = w_->size();
      ca.channel = c;
      ca.nchannels = nc;
      host::primitives<T, Op> p(*w_, ca, K::name, Algo::name, in, in_elems, out, out_elems, op);
      Algo::run(K{}, p, static_cast<const coll_args&>(ca));
    }
  }

 private:
  host::world* w_;
  int rank_;
};

COLLCOMM_NAMESPACE_END
