// tests/mp/test_host_matrix.hpp — every kind x algorithm on the host executor with ranks as
// processes (2..8 forked processes, tcp bootstrap on loopback, one communicator<host_shm> per
// job), random inputs whose every reduction order is exact (tests/common/exact_reference.hpp),
// every output element compared bit for bit with the reference, outputs poisoned first and the
// poison checked where a rank has no output and in a guard zone after every output, in place and
// out of place (where the kind and algorithm allow), counts 0, 1, n+1, 97 and one spanning several
// slots, with the three option sets of the thread matrix rotating over the world sizes.
//
// Each rank computes every rank's inputs from the seed (printed; COLLCOMM_TEST_SEED replays), so
// each checks its own outputs without any exchange. A child reports its first wrong elements on
// stderr and through its exit code; the parent fails the test case with the seed in the message.
#pragma once

#include "test_host_fork.hpp"

#include <common/exact_reference.hpp>
#include <common/matrix.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <vector>

namespace collcomm_test::mp {

struct option_set {
  int channels;
  std::size_t slot_bytes;
  int slots;
};
inline constexpr option_set option_sets[3] = {{2, 4096, 8}, {1, 64, 2}, {3, 256, 4}};

inline std::uint64_t matrix_seed() {
  static const std::uint64_t s = [] {
    if (const char* e = std::getenv("COLLCOMM_TEST_SEED"); e != nullptr && *e != '\0')
      return static_cast<std::uint64_t>(std::strtoull(e, nullptr, 0));
    return fresh_seed("host process matrix");
  }();
  return s;
}

template <class K>
constexpr collcomm::index_t in_size(int n, collcomm::index_t count) {
  namespace k = collcomm::kind;
  if constexpr (std::is_same_v<K, k::reduce_scatter> || std::is_same_v<K, k::all_to_all> ||
                std::is_same_v<K, k::scatter>)
    return static_cast<collcomm::index_t>(n) * count;
  else
    return count;
}
template <class K>
constexpr collcomm::index_t out_size(int n, collcomm::index_t count) {
  namespace k = collcomm::kind;
  if constexpr (std::is_same_v<K, k::all_gather> || std::is_same_v<K, k::all_to_all> || std::is_same_v<K, k::gather>)
    return static_cast<collcomm::index_t>(n) * count;
  else
    return count;
}

template <class T>
void poison(T* p, collcomm::index_t n) {
  std::memset(static_cast<void*>(p), 0xFF, n * sizeof(T));  // NaN in every float format, -1 or max in integers
}
template <class T>
bool is_poison(const T& v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  for (unsigned char c : b)
    if (c != 0xFF) return false;
  return true;
}

template <class K, class A, class T, class Op, class Comm>
void call(Comm& comm, const T* send, T* recv, collcomm::index_t count, int root) {
  using namespace collcomm;
  const int n = comm.size(), r = comm.rank();
  if constexpr (std::is_same_v<K, kind::all_reduce>)
    all_reduce<A>(comm, send, recv, count, Op{});
  else if constexpr (std::is_same_v<K, kind::reduce_scatter>)
    reduce_scatter<A>(comm, send, recv, count, Op{});
  else if constexpr (std::is_same_v<K, kind::all_gather>)
    all_gather<A>(comm, send, recv, count);
  else if constexpr (std::is_same_v<K, kind::broadcast>)
    broadcast<A>(comm, send, recv, count, root);
  else if constexpr (std::is_same_v<K, kind::reduce>)
    reduce<A>(comm, send, recv, count, Op{}, root);
  else if constexpr (std::is_same_v<K, kind::all_to_all>)
    all_to_all<A>(comm, send, recv, count);
  else if constexpr (std::is_same_v<K, kind::gather>)
    gather<A>(comm, send, recv, count, root);
  else if constexpr (std::is_same_v<K, kind::scatter>)
    scatter<A>(comm, send, recv, count, root);
  else
    send_recv<A>(comm, send, recv, count, (r + 1) % n, (r + n - 1) % n);
}

// One composition on this rank: every count, in and out of place. Returns the wrong elements seen
// (and prints the first few); `calls` counts the calls made.
template <class K, class A, class T, class Op, class Comm>
long run_composition(Comm& comm, std::uint64_t seed, std::size_t slot_bytes, rank_report& rep, long& calls) {
  using namespace collcomm;
  const int n = comm.size(), r = comm.rank();
  const index_t slot_elems = slot_bytes / sizeof(T);
  const index_t large = std::min<index_t>(3 * slot_elems * static_cast<index_t>(n) + 5, 5000);
  const index_t counts[] = {0, 1, static_cast<index_t>(n) + 1, 97, large};
  constexpr bool in_place_ok = has_in_place<K> && supports_in_place<A>;
  long wrong = 0;
  int call_index = 0;
  for (index_t count : counts) {
    for (int place = 0; place < (in_place_ok ? 2 : 1); ++place, ++call_index) {
      const bool in_place = place == 1;
      case_config c{n, count, call_index % n, in_place};
      std::vector<std::vector<T>> x(static_cast<std::size_t>(n));
      for (int s = 0; s < n; ++s) {
        std::mt19937_64 g(seed ^ (static_cast<std::uint64_t>(call_index) * 0x9e3779b97f4a7c15ull) ^
                          (static_cast<std::uint64_t>(s) << 48));
        x[static_cast<std::size_t>(s)].resize(in_size<K>(n, count));
        auto& xs = x[static_cast<std::size_t>(s)];
        for (std::size_t i = 0; i < xs.size(); ++i)
          xs[i] = random_value<T, Op>(g, n, s, static_cast<collcomm::index_t>(i));
      }
      const auto expect = reference<K, T, Op>(x, c, Op{});
      const index_t is = in_size<K>(n, count), os = out_size<K>(n, count);
      constexpr index_t guard = 8;
      // Out of place: send = own input, recv = poisoned output + guard.
      // In place: one buffer in the kind's in-place position (kinds.hpp), the rest poisoned.
      std::vector<T> a, b;
      const T* send = nullptr;
      T* recv = nullptr;
      index_t recv_at = 0;  // where the output lies in the buffer checked (a in place, b else)
      const bool root_only_inplace = std::is_same_v<K, kind::gather> || std::is_same_v<K, kind::scatter>;
      if (!in_place || (root_only_inplace && r != c.root)) {
        a = x[static_cast<std::size_t>(r)];
        b.resize(os + guard);
        poison(b.data(), os + guard);
        send = a.data();
        recv = b.data();
      } else {
        const index_t big = std::max(is, os);
        a.resize(big + guard);
        poison(a.data(), big + guard);
        index_t send_at = 0;
        if constexpr (std::is_same_v<K, kind::reduce_scatter>) recv_at = static_cast<index_t>(r) * count;
        if constexpr (std::is_same_v<K, kind::all_gather>) send_at = static_cast<index_t>(r) * count;
        if constexpr (std::is_same_v<K, kind::gather>) send_at = static_cast<index_t>(c.root) * count;
        if constexpr (std::is_same_v<K, kind::scatter>) recv_at = static_cast<index_t>(c.root) * count;
        const bool has_input = !(std::is_same_v<K, kind::broadcast> && r != c.root);
        if (has_input)
          std::copy(x[static_cast<std::size_t>(r)].begin(), x[static_cast<std::size_t>(r)].end(),
                    a.begin() + static_cast<std::ptrdiff_t>(send_at));
        send = a.data() + send_at;
        recv = a.data() + recv_at;
      }
      ++calls;
      call<K, A, T, Op>(comm, send, recv, count, c.root);
      const auto& want = expect[static_cast<std::size_t>(r)];
      const T* got = recv;
      const index_t got_size = want ? want->size() : 0;
      auto bad = [&](const char* what, index_t i, const T& g, const T* w) {
        if (++wrong <= 3)
          child_fail(rep, r, 1,
                     "%s<%s> %s op=%s n=%d count=%zu root=%d %s: %s element %zu: got %s, want %s (seed %llu)", K::name,
                     A::name, element_name<T>, Op::name, n, static_cast<std::size_t>(count), c.root,
                     in_place ? "in place" : "out of place", what, static_cast<std::size_t>(i), show(g).c_str(),
                     w ? show(*w).c_str() : "poison", static_cast<unsigned long long>(matrix_seed()));
      };
      for (index_t i = 0; i < got_size; ++i)
        if (!same_bits(got[i], (*want)[i])) bad("output", i, got[i], &(*want)[i]);
      if (!in_place || (root_only_inplace && r != c.root)) {
        // No output on this rank: all of recv stays poisoned; else the guard after it.
        for (index_t i = got_size; i < os + guard; ++i)
          if (!is_poison(b[i])) bad(want ? "guard" : "non-significant output", i, b[i], nullptr);
        if (!std::equal(a.begin(), a.end(), x[static_cast<std::size_t>(r)].begin(),
                        [](const T& p, const T& q) { return same_bits(p, q); }))
          bad("input (changed by an out-of-place call)", 0, a.empty() ? T{} : a[0], nullptr);
      } else {
        const index_t big = std::max(is, os);
        for (index_t i = big; i < big + guard; ++i)
          if (!is_poison(a[i])) bad("guard", i, a[i], nullptr);
      }
    }
  }
  return wrong;
}

// The compositions of `Elements` x `Ops` (reducing kinds) or `Elements` (the others), every
// algorithm with a schedule for the kind, for kinds selected by Pick.
template <class Pick, class Elements, class Ops, class Comm, class Algos = all_algorithms>
int run_matrix(Comm& comm, std::uint64_t seed, std::size_t slot_bytes, rank_report& rep, long& calls,
               long& compositions) {
  long wrong = 0;
  for_each_schedule<Algos>([&]<class K, class A>(std::type_identity<K>, std::type_identity<A>) {
    if constexpr (Pick::template value<K>) {
      for_each_type(Elements{}, [&]<class T>(std::type_identity<T>) {
        if constexpr (K::reduces) {
          for_each_type(Ops{}, [&]<class Op>(std::type_identity<Op>) {
            if constexpr (collcomm::valid_composition<K, A, typename Comm::transport_type, Op, T>) {
              ++compositions;
              wrong += run_composition<K, A, T, Op>(
                  comm, seed ^ std::hash<std::string>{}(std::string(K::name) + A::name + element_name<T>), slot_bytes,
                  rep, calls);
            }
          });
        } else if constexpr (collcomm::valid_composition<K, A, typename Comm::transport_type, collcomm::op::none, T>) {
          ++compositions;
          wrong += run_composition<K, A, T, collcomm::op::none>(
              comm, seed ^ std::hash<std::string>{}(std::string(K::name) + A::name + element_name<T>), slot_bytes, rep,
              calls);
        }
      });
    }
  });
  return wrong == 0 ? 0 : 1;
}

// Runs the matrix on jobs of each size in `sizes`, each job one communicator of processes.
template <class Pick, class Elements, class Ops>
void run_jobs(std::initializer_list<int> sizes) {
  const std::uint64_t seed = matrix_seed();
  int which = 0;
  for (int n : sizes) {
    const option_set os = option_sets[which++ % 3];
    reports rep(n);
    const auto t0 = std::chrono::steady_clock::now();
    auto j = run_job(
        n,
        [&](bs::tcp& boot, rank_report& me) {
          collcomm::host::options opt;
          opt.channels = os.channels;
          opt.slot_bytes = os.slot_bytes;
          opt.slots = os.slots;
          opt.timeout = 20s;
          opt.window_bytes = std::size_t{1} << 20;
          host_comm comm(boot, opt);
          long calls = 0, compositions = 0;
          const int code = run_matrix<Pick, Elements, Ops>(comm, seed + static_cast<std::uint64_t>(n), os.slot_bytes,
                                                           me, calls, compositions);
          if (comm.rank() == 0)
            std::printf("n = %d (channels %d, slot_bytes %zu, slots %d): %ld compositions, %ld calls per rank\n", n,
                        os.channels, os.slot_bytes, os.slots, compositions, calls);
          return code;
        },
        rep, 100s);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE("n = " << n << ": " << secs << " s");
    for (int r = 0; r < n; ++r)
      CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "n = " << n << ", rank " << r << " exit "
                                                                      << j.codes[static_cast<std::size_t>(r)] << ": "
                                                                      << rep[r].msg << " (seed " << seed << ")");
  }
}

struct pick_reducing {
  template <class K>
  static constexpr bool value = K::reduces;
};
struct pick_moving {
  template <class K>
  static constexpr bool value = !K::reduces;
};

}  // namespace collcomm_test::mp
