// collcomm/algo/hierarchical.hpp — hierarchical<Intra, Inter>: schedules for ranks spread over
// several hosts, composed of an intra-host algorithm and an inter-host one, so that each element
// crosses between hosts about once instead of at every hop of a flat ring.
//
// Where the ranks sit comes from coll_args::topo (topology.hpp); null means one host. Every phase
// runs Intra's or Inter's own schedule on a subgroup of ranks through `hier_detail::on_subgroup`,
// a primitives adapter that renames the subgroup's members to global ranks, places the
// sub-schedule's buffers in the call's (an offset, another buffer, or blocks scattered by rank),
// and drops `fin` in phases where a value is not complete yet: a value is finalized once, in the
// phase that completes it, and the executors' post (avg) divides by the call's nranks.
//
// Ranks, hosts: N ranks on H hosts, host h has L_h ranks (local index i), P = max L_h. Each channel
// works on its own share of the data (channel_range); sub-schedules see one channel.
//
//   all_reduce  The share is cut into P parts of equal size (a multiple of align_elems) and a
//               remainder, part P. On host h, part j is owned by local rank j mod L_h.
//               1. intra: owners get their parts' host sums (not finalized): Intra reduce_scatter
//                  over rounds of L_h parts, where Intra has reduce_scatter and all_gather, and an
//                  Intra reduce to the owner for the parts no full round covers;
//               2. inter: for j = 0..P in that order, Inter all_reduce of part j, in place on the
//                  output, among the owners of j on every host (finalizes);
//               3. intra: the mirror of 1 (all_gather rounds, broadcasts from the owners).
//               Every rank takes its inter groups in increasing j, so the lowest unfinished group
//               always has all its members and the phases cannot deadlock.
//               Cross-host elements sent per rank, equal hosts, Inter = ring: 2(H-1)/H * count/L
//               (a flat ring: 2(N-1)/N * count, all of it across hosts on the ranks at a host's edge).
//   reduce_scatter  A schedule holds no scratch, and an output of count elements cannot hold the
//               H*count (or L*count) partial sums that an intra-then-inter reduce_scatter keeps
//               between its phases. So: P pipelined rings (Inter's reduce_scatter) over the ranks
//               grouped by host, ring q on piece q of the share; in ring q host h's ranks are
//               rotated so that the one that sends across hosts is local rank q mod L_h. Cross-host
//               elements per rank, equal hosts: (N-1)/L * count (flat ring, hosts contiguous:
//               (N-1) * count on the ranks at a host's edge, 0 elsewhere).
//   all_gather  1. inter: for j = 0..P-1, the owners of j (local rank j mod L_h of each host) run
//                  Inter all_gather of their blocks; 2. intra: for each host h', its blocks are
//                  spread over host h by Intra all_gather when L_h' == L_h and Intra has one, else
//                  by one Intra broadcast per block from the rank that holds it. Cross-host
//                  elements per rank, equal hosts, Inter = ring: (H-1) * count.
//   broadcast   In pieces: Inter broadcast among local rank (root's local index mod L_h) of each
//               host, from the root's host, then Intra broadcast on every host from that rank.
//
// One host (topo null or nhosts 1): Intra's own schedule (or Inter's where Intra has none for the
// kind). One rank per host: Inter's own schedule.
//
// Requirements (checked by the constraints of run, and by check_composition with a message):
// Intra and Inter are FIFO algorithms (needs_direct == false): the direct primitives cannot run on
// a subgroup (barrier() and direct_reduce_copy span every rank of the communicator, and ranks run
// different numbers of sub-schedules), so on_subgroup does not offer them. all_reduce needs Intra
// reduce and broadcast (and uses its reduce_scatter and all_gather where it has them) and Inter
// all_reduce; reduce_scatter needs Inter reduce_scatter; all_gather needs Inter all_gather and
// Intra broadcast; broadcast needs both broadcasts. Both must be in_place_safe (the inner phases
// work in place). hierarchical<ring, ring> and hierarchical<tree, ring> serve all four kinds;
// hierarchical<ring, tree> all_reduce and broadcast.
#pragma once

#include <collcomm/algo/primitives.hpp>
#include <collcomm/topology.hpp>

#include <cstddef>
#include <initializer_list>

COLLCOMM_NAMESPACE_BEGIN
namespace algo {

namespace hier_detail {

// A group of ranks that a sub-schedule runs on: member s (0 <= s < size()) is rank global(s).
struct subgroup {
  enum class form : unsigned char {
    all,      // every rank, in rank order (arg unused)
    host,     // the ranks of host `arg`, by local index
    part,     // one rank per host: on host h, local rank arg mod L_h; member s is on host s
    rotated,  // every rank, grouped by host; within host h local rank (m + arg + 1) mod L_h at m
  };
  const topology* t = nullptr;
  form f = form::all;
  int arg = 0;
  int n = 1;  // form::all: the call's nranks

  COLLCOMM_HD constexpr int size() const noexcept {
    switch (f) {
      case form::host:
        return t->local_size(arg);
      case form::part:
        return t->nhosts;
      case form::rotated:
        return t->nranks;
      default:
        return n;
    }
  }
  COLLCOMM_HD constexpr int global(int s) const noexcept {
    switch (f) {
      case form::host:
        return t->rank_at(arg, s);
      case form::part:
        return t->rank_at(s, arg % t->local_size(s));
      case form::rotated: {
        int h = 0;
        while (t->host_first[h + 1] <= s) ++h;
        const int l = t->local_size(h);
        return t->rank_at(h, (s - t->host_first[h] + arg + 1) % l);
      }
      default:
        return s;
    }
  }
  // The member index of rank r (r is a member).
  COLLCOMM_HD constexpr int index_of(int r) const noexcept {
    switch (f) {
      case form::host:
        return t->local(r);
      case form::part:
        return t->host(r);
      case form::rotated: {
        const int h = t->host(r);
        return t->host_first[h] + mod(t->local(r) - arg - 1, t->local_size(h));
      }
      default:
        return r;
    }
  }
};

// Where a sub-schedule's buffer lies in the call's: sub element x is element base + x of buffer
// `which`; or, when `block` > 0, sub element b * block + o (o < block) is element
// base + blocks.global(b) * stride + o — sub-block b is the call's block of rank blocks.global(b).
// Sub-schedules address multi-block buffers one block per primitive call (ring does).
struct buf_map {
  buffer which = buffer::input;
  index_t base = 0;
  index_t block = 0;
  index_t stride = 0;
  subgroup blocks{};

  COLLCOMM_HD constexpr buf_ref operator()(buf_ref b) const noexcept {
    if (block == 0) return {which, base + b.offset};
    const index_t blk = b.offset / block, o = b.offset % block;
    return {which, base + static_cast<index_t>(blocks.global(static_cast<int>(blk))) * stride + o};
  }
};

COLLCOMM_HD constexpr buf_map contiguous(buffer which, index_t base) noexcept { return {which, base, 0, 0, {}}; }
COLLCOMM_HD constexpr buf_map scattered(buffer which, index_t base, index_t block, index_t stride,
                                        subgroup blocks) noexcept {
  return {which, base, block, stride, blocks};
}

// The primitives of a sub-schedule on subgroup g: peers are member indices, buffers are mapped by
// in_map / out_map, and fin is passed on only where `fin_ok`. FIFO family only (see the top).
template <class P>
class on_subgroup {
 public:
  COLLCOMM_HD on_subgroup(P& p, subgroup g, buf_map in_map, buf_map out_map, bool fin_ok) noexcept
      : p_(p), g_(g), in_(in_map), out_(out_map), fin_ok_(fin_ok) {}

  COLLCOMM_EXEC_CHECK_DISABLE
  COLLCOMM_HD index_t slot_elems() const { return p_.slot_elems(); }
  COLLCOMM_EXEC_CHECK_DISABLE
  COLLCOMM_HD index_t align_elems() const { return p_.align_elems(); }

  COLLCOMM_EXEC_CHECK_DISABLE
  COLLCOMM_HD void send(peers to, buf_ref src, index_t n) { p_.send(ranks(to), map(src), n); }
  COLLCOMM_EXEC_CHECK_DISABLE
  COLLCOMM_HD void recv(peers from, buf_ref dst, index_t n) { p_.recv(ranks(from), map(dst), n); }
  COLLCOMM_EXEC_CHECK_DISABLE
  COLLCOMM_HD void recv_reduce_send(peers from, buf_ref src, peers to, index_t n) {
    p_.recv_reduce_send(ranks(from), map(src), ranks(to), n);
  }
  COLLCOMM_EXEC_CHECK_DISABLE
  COLLCOMM_HD void recv_reduce_copy(peers from, buf_ref src, buf_ref dst, index_t n, bool fin) {
    p_.recv_reduce_copy(ranks(from), map(src), map(dst), n, fin && fin_ok_);
  }
  COLLCOMM_EXEC_CHECK_DISABLE
  COLLCOMM_HD void recv_reduce_copy_send(peers from, buf_ref src, buf_ref dst, peers to, index_t n, bool fin) {
    p_.recv_reduce_copy_send(ranks(from), map(src), map(dst), ranks(to), n, fin && fin_ok_);
  }
  COLLCOMM_EXEC_CHECK_DISABLE
  COLLCOMM_HD void recv_copy_send(peers from, buf_ref dst, peers to, index_t n) {
    p_.recv_copy_send(ranks(from), map(dst), ranks(to), n);
  }
  COLLCOMM_EXEC_CHECK_DISABLE
  COLLCOMM_HD void copy_send(buf_ref src, buf_ref dst, peers to, index_t n, bool fin = false) {
    p_.copy_send(map(src), map(dst), ranks(to), n, fin && fin_ok_);
  }
  COLLCOMM_EXEC_CHECK_DISABLE
  COLLCOMM_HD void copy(buf_ref src, buf_ref dst, index_t n, bool fin = false) {
    p_.copy(map(src), map(dst), n, fin && fin_ok_);
  }

 private:
  COLLCOMM_HD peers ranks(peers ps) const noexcept {
    peers g;
    for (int s : ps) g.add(g_.global(s));
    return g;
  }
  COLLCOMM_HD buf_ref map(buf_ref b) const noexcept { return b.which == buffer::input ? in_(b) : out_(b); }

  P& p_;
  subgroup g_;
  buf_map in_, out_;
  bool fin_ok_;
};

// A sub-schedule's arguments: this rank's member index in g, one channel, no topology.
COLLCOMM_HD constexpr coll_args sub_args(int me, subgroup g, index_t count, int root) noexcept {
  coll_args s;
  s.rank = g.index_of(me);
  s.nranks = g.size();
  s.count = count;
  s.root = root;
  return s;
}

// A runs a schedule of kind K over primitives Q.
template <class A, class K, class Q>
concept runs = requires(Q& q, const coll_args& a) {
  A::run(K{}, q, a);
};

template <class A>
constexpr bool in_place_safe_of() {
  if constexpr (requires { A::in_place_safe; })
    return static_cast<bool>(A::in_place_safe);
  else
    return true;
}

// A can run on a subgroup: FIFO primitives only, and safe in place.
template <class A>
concept subgroup_algorithm = !A::needs_direct && in_place_safe_of<A>();

// "hierarchical<" Intra::name "," Inter::name ">", as a constant.
template <class Intra, class Inter>
struct name_of {
  static constexpr std::size_t len(const char* s) noexcept {
    std::size_t k = 0;
    while (s[k] != '\0') ++k;
    return k;
  }
  static constexpr std::size_t size = 13 + len(Intra::name) + 1 + len(Inter::name) + 2;
  struct text_t {
    char text[size];
  };
  static constexpr text_t make() noexcept {
    text_t t{};
    std::size_t k = 0;
    for (const char* part : {"hierarchical<", Intra::name, ",", Inter::name, ">"})
      for (const char* s = part; *s != '\0'; ++s) t.text[k++] = *s;
    t.text[k] = '\0';
    return t;
  }
  static constexpr text_t value = make();
};

}  // namespace hier_detail

template <class Intra, class Inter>
struct hierarchical {
  static constexpr const char* name = hier_detail::name_of<Intra, Inter>::value.text;
  static constexpr bool needs_direct = Intra::needs_direct || Inter::needs_direct;
  static constexpr bool in_place_safe = true;  // the phases run in place anyway (the requirements)

  using intra_type = Intra;
  using inter_type = Inter;

 private:
  using subgroup = hier_detail::subgroup;
  using form = subgroup::form;
  template <class P>
  using sub = hier_detail::on_subgroup<P>;

  // The ranks of a call: flat when there is no topology.
  COLLCOMM_HD static constexpr int hosts_of(const coll_args& a) noexcept { return a.topo ? a.topo->nhosts : 1; }

  template <class A, class K, class P>
  static constexpr bool direct_runs = hier_detail::runs<A, K, P>;

 public:
  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  requires hier_detail::subgroup_algorithm<Intra> && hier_detail::subgroup_algorithm<Inter> &&
      hier_detail::runs<Intra, kind::reduce, sub<P>> && hier_detail::runs<Intra, kind::broadcast, sub<P>> &&
      hier_detail::runs<Inter, kind::all_reduce, sub<P>>
          COLLCOMM_HD static void run(kind::all_reduce, P& p, const coll_args& a) {
    if (hosts_of(a) == 1) {
      if constexpr (direct_runs<Intra, kind::all_reduce, P>) {
        Intra::run(kind::all_reduce{}, p, a);
      } else {  // reduce to rank 0, broadcast from it
        const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
        if (mine.size == 0) return;
        const subgroup all{nullptr, form::all, 0, a.nranks};
        sub<P> up(p, all, hier_detail::contiguous(buffer::input, mine.begin),
                  hier_detail::contiguous(buffer::output, mine.begin), true);
        Intra::run(kind::reduce{}, up, hier_detail::sub_args(a.rank, all, mine.size, 0));
        sub<P> down(p, all, hier_detail::contiguous(buffer::output, mine.begin),
                    hier_detail::contiguous(buffer::output, mine.begin), false);
        Intra::run(kind::broadcast{}, down, hier_detail::sub_args(a.rank, all, mine.size, 0));
      }
      return;
    }
    const topology& t = *a.topo;
    if (t.nhosts == t.nranks) {  // one rank per host: host h is rank h
      Inter::run(kind::all_reduce{}, p, a);
      return;
    }
    const int me = a.rank, h = t.host(me), L = t.local_size(h), i = t.local(me), parts = t.max_local_size();
    const index_t align = p.align_elems();
    const range mine = channel_range(a.count, a.channel, a.nchannels, align);
    if (mine.size == 0) return;
    // Parts 0..parts-1 of `per` elements each, then the remainder as part `parts`.
    const index_t per = mine.size / (static_cast<index_t>(parts) * align) * align;
    auto part = [&](int j) -> range {
      const index_t b = mine.begin + static_cast<index_t>(j) * per;
      return j < parts ? range{b, per} : range{b, mine.begin + mine.size - b};
    };
    constexpr bool rounds_ok =
        hier_detail::runs<Intra, kind::reduce_scatter, sub<P>> && hier_detail::runs<Intra, kind::all_gather, sub<P>>;
    const int rounds = rounds_ok && per > 0 ? parts / L : 0;  // full reduce_scatter rounds of L parts
    const subgroup local{&t, form::host, h, 0};

    // 1. Host sums of the parts this rank owns, in its output, not finalized.
    if constexpr (rounds_ok) {
      for (int k = 0; k < rounds; ++k) {
        sub<P> q(p, local, hier_detail::contiguous(buffer::input, part(k * L).begin),
                 hier_detail::contiguous(buffer::output, part(k * L + i).begin), false);
        Intra::run(kind::reduce_scatter{}, q, hier_detail::sub_args(me, local, per, 0));
      }
    }
    for (int j = rounds * L; j <= parts; ++j) {
      const range rg = part(j);
      if (rg.size == 0) continue;
      sub<P> q(p, local, hier_detail::contiguous(buffer::input, rg.begin),
               hier_detail::contiguous(buffer::output, rg.begin), false);
      Intra::run(kind::reduce{}, q, hier_detail::sub_args(me, local, rg.size, j % L));
    }
    // 2. Across hosts: part j among its owners, in increasing j, finalized.
    for (int j = i; j <= parts; j += L) {
      const range rg = part(j);
      if (rg.size == 0) continue;
      const subgroup owners{&t, form::part, j, 0};
      sub<P> q(p, owners, hier_detail::contiguous(buffer::output, rg.begin),
               hier_detail::contiguous(buffer::output, rg.begin), true);
      Inter::run(kind::all_reduce{}, q, hier_detail::sub_args(me, owners, rg.size, 0));
    }
    // 3. The owners' complete parts to every rank of the host.
    if constexpr (rounds_ok) {
      for (int k = 0; k < rounds; ++k) {
        sub<P> q(p, local, hier_detail::contiguous(buffer::output, part(k * L + i).begin),
                 hier_detail::contiguous(buffer::output, part(k * L).begin), false);
        Intra::run(kind::all_gather{}, q, hier_detail::sub_args(me, local, per, 0));
      }
    }
    for (int j = rounds * L; j <= parts; ++j) {
      const range rg = part(j);
      if (rg.size == 0) continue;
      sub<P> q(p, local, hier_detail::contiguous(buffer::output, rg.begin),
               hier_detail::contiguous(buffer::output, rg.begin), false);
      Intra::run(kind::broadcast{}, q, hier_detail::sub_args(me, local, rg.size, j % L));
    }
  }

  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  requires hier_detail::subgroup_algorithm<Intra> && hier_detail::subgroup_algorithm<Inter> &&
      hier_detail::runs<Inter, kind::reduce_scatter, sub<P>>
          COLLCOMM_HD static void run(kind::reduce_scatter, P& p, const coll_args& a) {
    if (hosts_of(a) == 1) {
      if constexpr (direct_runs<Intra, kind::reduce_scatter, P>)
        Intra::run(kind::reduce_scatter{}, p, a);
      else
        Inter::run(kind::reduce_scatter{}, p, a);
      return;
    }
    const topology& t = *a.topo;
    if (t.nhosts == t.nranks) {
      Inter::run(kind::reduce_scatter{}, p, a);
      return;
    }
    const int rings = t.max_local_size();
    const index_t align = p.align_elems();
    const range mine = channel_range(a.count, a.channel, a.nchannels, align);
    for (int q = 0; q < rings; ++q) {
      const range rg = piece(mine, static_cast<index_t>(rings), static_cast<index_t>(q), align);
      if (rg.size == 0) continue;
      const subgroup ring{&t, form::rotated, q, 0};
      sub<P> s(p, ring, hier_detail::scattered(buffer::input, rg.begin, rg.size, a.count, ring),
               hier_detail::contiguous(buffer::output, rg.begin), true);
      Inter::run(kind::reduce_scatter{}, s, hier_detail::sub_args(a.rank, ring, rg.size, 0));
    }
  }

  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  requires hier_detail::subgroup_algorithm<Intra> && hier_detail::subgroup_algorithm<Inter> &&
      hier_detail::runs<Inter, kind::all_gather, sub<P>> && hier_detail::runs<Intra, kind::broadcast, sub<P>>
          COLLCOMM_HD static void run(kind::all_gather, P& p, const coll_args& a) {
    if (hosts_of(a) == 1) {
      if constexpr (direct_runs<Intra, kind::all_gather, P>)
        Intra::run(kind::all_gather{}, p, a);
      else
        Inter::run(kind::all_gather{}, p, a);
      return;
    }
    const topology& t = *a.topo;
    if (t.nhosts == t.nranks) {
      Inter::run(kind::all_gather{}, p, a);
      return;
    }
    const int me = a.rank, h = t.host(me), L = t.local_size(h), i = t.local(me), parts = t.max_local_size();
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    if (mine.size == 0) return;
    const index_t cnt = a.count;
    auto block_of = [&](int r) { return static_cast<index_t>(r) * cnt + mine.begin; };
    // 1. Across hosts: the owners of j exchange their blocks, for j = i, i + L, ... < parts. The
    // first reads the input; later ones this rank's block of the output, which the first wrote.
    for (int j = i; j < parts; j += L) {
      const subgroup owners{&t, form::part, j, 0};
      sub<P> q(p, owners,
               j == i ? hier_detail::contiguous(buffer::input, mine.begin)
                      : hier_detail::contiguous(buffer::output, block_of(me)),
               hier_detail::scattered(buffer::output, mine.begin, mine.size, cnt, owners), false);
      Inter::run(kind::all_gather{}, q, hier_detail::sub_args(me, owners, mine.size, 0));
    }
    // 2. Within the host, host by host: host h2's block of local rank k is held by the owner of
    // part k here, local rank k mod L.
    const subgroup local{&t, form::host, h, 0};
    for (int h2 = 0; h2 < t.nhosts; ++h2) {
      const int L2 = t.local_size(h2);
      if constexpr (hier_detail::runs<Intra, kind::all_gather, sub<P>>) {
        if (L2 == L) {
          const subgroup theirs{&t, form::host, h2, 0};
          sub<P> q(p, local, hier_detail::contiguous(buffer::output, block_of(t.rank_at(h2, i))),
                   hier_detail::scattered(buffer::output, mine.begin, mine.size, cnt, theirs), false);
          Intra::run(kind::all_gather{}, q, hier_detail::sub_args(me, local, mine.size, 0));
          continue;
        }
      }
      for (int k = 0; k < L2; ++k) {
        const index_t b = block_of(t.rank_at(h2, k));
        sub<P> q(p, local, hier_detail::contiguous(buffer::output, b), hier_detail::contiguous(buffer::output, b),
                 false);
        Intra::run(kind::broadcast{}, q, hier_detail::sub_args(me, local, mine.size, k % L));
      }
    }
  }

  COLLCOMM_EXEC_CHECK_DISABLE
  template <class P>
  requires hier_detail::subgroup_algorithm<Intra> && hier_detail::subgroup_algorithm<Inter> &&
      hier_detail::runs<Inter, kind::broadcast, sub<P>> && hier_detail::runs<Intra, kind::broadcast, sub<P>>
          COLLCOMM_HD static void run(kind::broadcast, P& p, const coll_args& a) {
    if (hosts_of(a) == 1) {
      Intra::run(kind::broadcast{}, p, a);
      return;
    }
    const topology& t = *a.topo;
    if (t.nhosts == t.nranks) {
      Inter::run(kind::broadcast{}, p, a);
      return;
    }
    const int me = a.rank, h = t.host(me), L = t.local_size(h), i = t.local(me);
    const int root_local = t.local(a.root);
    const range mine = channel_range(a.count, a.channel, a.nchannels, p.align_elems());
    const subgroup carriers{&t, form::part, root_local, 0};  // includes the root
    const subgroup local{&t, form::host, h, 0};
    const bool carrier = i == root_local % L;
    // Pieces of a few slots, so that the hosts' broadcasts start before the last piece arrives.
    const index_t step = p.slot_elems() * 4;
    for (index_t off = mine.begin; off < mine.begin + mine.size; off += step) {
      const index_t len = min_of(step, mine.begin + mine.size - off);
      if (carrier) {
        sub<P> q(p, carriers, hier_detail::contiguous(buffer::input, off), hier_detail::contiguous(buffer::output, off),
                 false);
        Inter::run(kind::broadcast{}, q, hier_detail::sub_args(me, carriers, len, t.host(a.root)));
      }
      sub<P> q(p, local, hier_detail::contiguous(buffer::output, off), hier_detail::contiguous(buffer::output, off),
               false);
      Intra::run(kind::broadcast{}, q, hier_detail::sub_args(me, local, len, root_local % L));
    }
  }
};

}  // namespace algo
COLLCOMM_NAMESPACE_END
