// algo::hierarchical on the host executor: ranks are threads, hosts are pretended
// (communicator::set_topology), and data really moves. hierarchical<ring, ring> and
// hierarchical<tree, ring> run all_reduce, reduce_scatter, all_gather and broadcast over equal,
// unequal and non-contiguous hosts; random inputs (seed printed; COLLCOMM_TEST_SEED repeats one),
// outputs poisoned before each call, every element checked against a float64 or exact integer
// reference; sum, avg, max over float and int32; counts 0, 1, primes, and more than a slot holds;
// in place and out of place. And topology_table itself.
#include <collcomm/host.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using collcomm::index_t;
using collcomm::topology_table;
using comm_t = collcomm::communicator<collcomm::transport::host_shm>;
namespace algo = collcomm::algo;
namespace op = collcomm::op;

std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("COLLCOMM_TEST_SEED");
    const std::uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    MESSAGE("seed " << s << " (rerun with COLLCOMM_TEST_SEED=" << s << ")");
    return s;
  }();
  return seed;
}

struct pretend_hosts {
  std::vector<std::uint64_t> ids;
  const char* name;
};

// Equal and contiguous, equal and dealt round robin (host_of = r % 3), unequal {3,1,2}, unequal
// and shuffled {2,4,1}, one rank per host.
const std::vector<pretend_hosts>& layouts() {
  static const std::vector<pretend_hosts> l = {
      {{0, 0, 1, 1}, "2 hosts x 2, contiguous"},
      {{0, 1, 2, 0, 1, 2}, "3 hosts x 2, round robin"},
      {{0, 0, 0, 1, 2, 2}, "hosts of 3, 1, 2"},
      {{5, 9, 9, 5, 9, 7, 9}, "hosts of 2, 4, 1, shuffled"},
      {{4, 3, 2}, "3 hosts x 1"},
  };
  return l;
}

// slot_bytes 256: 64 floats or int32s per message, so counts above 64 take several slots.
collcomm::host::options small_slots() {
  collcomm::host::options o;
  o.channels = 2;
  o.slot_bytes = 256;
  o.slots = 2;
  return o;
}

const std::vector<index_t> counts = {0, 1, 7, 13, 97, 257, 1031};

enum class opk { sum, avg, max };
const char* opk_name(opk o) { return o == opk::sum ? "sum" : o == opk::avg ? "avg" : "max"; }

template <class T>
T poison() {
  if constexpr (std::is_floating_point_v<T>)
    return std::numeric_limits<T>::quiet_NaN();
  else
    return static_cast<T>(0x5A5A5A5A);
}

template <class T>
std::vector<T> random_vector(index_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>)
      x = std::uniform_real_distribution<T>(-1, 1)(rng);
    else
      x = static_cast<T>(static_cast<std::uint32_t>(rng()));
  }
  return v;
}

// Whether `got` is the reduction of xs under o: float64 with the rounding bound of
// tests/host/reference.hpp ((n+2) * eps * sum |x|; avg adds one rounding), int32 exact (wrapping
// sum; avg = wrapped sum / n truncated).
template <class T>
bool reduced_ok(opk o, const std::vector<T>& xs, T got) {
  const int n = static_cast<int>(xs.size());
  if constexpr (std::is_floating_point_v<T>) {
    double s = 0, mag = 0, mx = -INFINITY;
    for (T x : xs) {
      s += x;
      mag += std::fabs(static_cast<double>(x));
      mx = std::max(mx, static_cast<double>(x));
    }
    const double eps = std::numeric_limits<T>::epsilon(), tol = (n + 2) * eps * mag;
    if (std::isnan(got)) return false;
    if (o == opk::max) return static_cast<double>(got) == mx;
    if (o == opk::sum) return std::fabs(got - s) <= tol;
    return std::fabs(got - s / n) <= tol / n + eps * std::fabs(s / n);
  } else {
    std::uint32_t s = 0;
    T mx = std::numeric_limits<T>::lowest();
    for (T x : xs) {
      s += static_cast<std::uint32_t>(x);
      mx = std::max(mx, x);
    }
    if (o == opk::max) return got == mx;
    if (o == opk::sum) return got == static_cast<T>(s);
    return got == static_cast<T>(static_cast<T>(s) / n);
  }
}

template <class T, class F>
void with_op(opk o, F&& f) {
  if (o == opk::sum) f(op::sum{});
  if (o == opk::avg) f(op::avg{});
  if (o == opk::max) f(op::max{});
}

// Runs `call(comm, in, out)` on every rank of a world with the pretend hosts, then `check`.
template <class Call>
void run_world(const pretend_hosts& hosts, Call&& call) {
  const int n = static_cast<int>(hosts.ids.size());
  const auto table = std::make_shared<const topology_table>(topology_table::from_host_ids(hosts.ids));
  collcomm::host::world w(n, small_slots());
  collcomm::host::run_ranks(w, [&](comm_t& comm) {
    comm.set_topology(table);
    call(comm);
  });
}

template <class Algo, class T>
int all_reduce_case(const pretend_hosts& hosts, index_t count, opk o, bool in_place, std::mt19937_64& rng) {
  const int n = static_cast<int>(hosts.ids.size());
  std::vector<std::vector<T>> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
  for (auto& v : in) v = random_vector<T>(count, rng);
  for (int r = 0; r < n; ++r)
    out[static_cast<size_t>(r)] = in_place ? in[static_cast<size_t>(r)] : std::vector<T>(count, poison<T>());
  with_op<T>(o, [&](auto opv) {
    run_world(hosts, [&](comm_t& comm) {
      const auto r = static_cast<size_t>(comm.rank());
      collcomm::all_reduce<Algo>(comm, in_place ? out[r].data() : in[r].data(), out[r].data(), count, opv);
    });
  });
  int wrong = 0;
  std::vector<T> xs(static_cast<size_t>(n));
  for (index_t i = 0; i < count; ++i) {
    for (int q = 0; q < n; ++q) xs[static_cast<size_t>(q)] = in[static_cast<size_t>(q)][i];
    for (int r = 0; r < n; ++r) wrong += !reduced_ok<T>(o, xs, out[static_cast<size_t>(r)][i]);
  }
  return wrong;
}

template <class Algo, class T>
int reduce_scatter_case(const pretend_hosts& hosts, index_t count, opk o, bool in_place, std::mt19937_64& rng) {
  const int n = static_cast<int>(hosts.ids.size());
  std::vector<std::vector<T>> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
  for (auto& v : in) v = random_vector<T>(count * static_cast<index_t>(n), rng);
  std::vector<std::vector<T>> orig = in;
  for (auto& v : out) v.assign(count, poison<T>());
  with_op<T>(o, [&](auto opv) {
    run_world(hosts, [&](comm_t& comm) {
      const auto r = static_cast<size_t>(comm.rank());
      T* dst = in_place ? in[r].data() + r * count : out[r].data();
      collcomm::reduce_scatter<Algo>(comm, in[r].data(), dst, count, opv);
    });
  });
  int wrong = 0;
  std::vector<T> xs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    for (index_t i = 0; i < count; ++i) {
      for (int q = 0; q < n; ++q)
        xs[static_cast<size_t>(q)] = orig[static_cast<size_t>(q)][static_cast<size_t>(r) * count + i];
      const T got =
          in_place ? in[static_cast<size_t>(r)][static_cast<size_t>(r) * count + i] : out[static_cast<size_t>(r)][i];
      wrong += !reduced_ok<T>(o, xs, got);
    }
  return wrong;
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class Algo, class T>
int all_gather_case(const pretend_hosts& hosts, index_t count, bool in_place, std::mt19937_64& rng) {
  const int n = static_cast<int>(hosts.ids.size());
  std::vector<std::vector<T>> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
  for (auto& v : in) v = random_vector<T>(count, rng);
  for (int r = 0; r < n; ++r) {
    out[static_cast<size_t>(r)].assign(count * static_cast<index_t>(n), poison<T>());
    if (in_place)
      std::copy(in[static_cast<size_t>(r)].begin(), in[static_cast<size_t>(r)].end(),
                out[static_cast<size_t>(r)].begin() + static_cast<std::ptrdiff_t>(static_cast<index_t>(r) * count));
  }
  run_world(hosts, [&](comm_t& comm) {
    const auto r = static_cast<size_t>(comm.rank());
    const T* src = in_place ? out[r].data() + r * count : in[r].data();
    collcomm::all_gather<Algo>(comm, src, out[r].data(), count);
  });
  int wrong = 0;
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      for (index_t i = 0; i < count; ++i)
        wrong +=
            !same_bits(out[static_cast<size_t>(r)][static_cast<size_t>(q) * count + i], in[static_cast<size_t>(q)][i]);
  return wrong;
}

template <class Algo, class T>
int broadcast_case(const pretend_hosts& hosts, index_t count, int root, bool in_place, std::mt19937_64& rng) {
  const int n = static_cast<int>(hosts.ids.size());
  std::vector<std::vector<T>> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
  for (auto& v : in) v = random_vector<T>(count, rng);
  for (int r = 0; r < n; ++r)
    out[static_cast<size_t>(r)] =
        in_place && r == root ? in[static_cast<size_t>(r)] : std::vector<T>(count, poison<T>());
  run_world(hosts, [&](comm_t& comm) {
    const auto r = static_cast<size_t>(comm.rank());
    const T* src = in_place && comm.rank() == root ? out[r].data() : in[r].data();
    collcomm::broadcast<Algo>(comm, src, out[r].data(), count, root);
  });
  int wrong = 0;
  for (int r = 0; r < n; ++r)
    for (index_t i = 0; i < count; ++i)
      wrong += !same_bits(out[static_cast<size_t>(r)][i], in[static_cast<size_t>(root)][i]);
  return wrong;
}

// Every layout x count x op x type x in place for one composition; failures name the case.
template <class Algo>
void run_matrix() {
  std::mt19937_64 rng(test_seed() ^ collcomm::name_id(Algo::name));
  int cases = 0, failed = 0;
  auto report = [&](int wrong, const std::string& what) {
    ++cases;
    if (wrong != 0 && ++failed <= 5) {
      const std::string msg = std::string(Algo::name) + " " + what + ": " + std::to_string(wrong) + " wrong elements";
      FAIL_CHECK(msg);
    }
  };
  for (const pretend_hosts& h : layouts()) {
    const int n = static_cast<int>(h.ids.size());
    for (index_t count : counts) {
      const bool in_place = (count + static_cast<index_t>(n)) % 2 == 0;
      const std::string at = std::string(h.name) + " count " + std::to_string(count) + (in_place ? " in place" : "");
      for (opk o : {opk::sum, opk::avg, opk::max}) {
        report(all_reduce_case<Algo, float>(h, count, o, in_place, rng),
               "all_reduce float " + std::string(opk_name(o)) + " " + at);
        report(all_reduce_case<Algo, std::int32_t>(h, count, o, !in_place, rng),
               "all_reduce int32 " + std::string(opk_name(o)) + " " + at);
        report(reduce_scatter_case<Algo, float>(h, count, o, in_place, rng),
               "reduce_scatter float " + std::string(opk_name(o)) + " " + at);
        report(reduce_scatter_case<Algo, std::int32_t>(h, count, o, !in_place, rng),
               "reduce_scatter int32 " + std::string(opk_name(o)) + " " + at);
      }
      report(all_gather_case<Algo, float>(h, count, in_place, rng), "all_gather float " + at);
      report(all_gather_case<Algo, std::int32_t>(h, count, !in_place, rng), "all_gather int32 " + at);
      for (int root : {0, n - 1, n / 2}) {
        report(broadcast_case<Algo, float>(h, count, root, in_place, rng),
               "broadcast float root " + std::to_string(root) + " " + at);
        report(broadcast_case<Algo, std::int32_t>(h, count, root, !in_place, rng),
               "broadcast int32 root " + std::to_string(root) + " " + at);
      }
    }
  }
  const std::string summary =
      std::string(Algo::name) + ": " + std::to_string(cases) + " calls checked, " + std::to_string(failed) + " wrong";
  MESSAGE(summary);
  CHECK(failed == 0);
}

}  // namespace

TEST_CASE("host hierarchical<ring, ring> over pretend hosts") {
  run_matrix<algo::hierarchical<algo::ring, algo::ring>>();
}

TEST_CASE("host hierarchical<tree, ring> over pretend hosts") {
  run_matrix<algo::hierarchical<algo::tree, algo::ring>>();
}

TEST_CASE("host hierarchical: no topology is one host") {
  const int n = 4;
  const index_t count = 300;
  std::mt19937_64 rng(test_seed());
  std::vector<std::vector<float>> in(n), out(n, std::vector<float>(count, poison<float>()));
  for (auto& v : in) v = random_vector<float>(count, rng);
  collcomm::host::world w(n, small_slots());
  collcomm::host::run_ranks(w, [&](comm_t& comm) {
    const auto r = static_cast<size_t>(comm.rank());
    collcomm::all_reduce<algo::hierarchical<algo::ring, algo::ring>>(comm, in[r].data(), out[r].data(), count,
                                                                     op::sum{});
  });
  int wrong = 0;
  std::vector<float> xs(n);
  for (index_t i = 0; i < count; ++i) {
    for (int q = 0; q < n; ++q) xs[static_cast<size_t>(q)] = in[static_cast<size_t>(q)][i];
    for (int r = 0; r < n; ++r) wrong += !reduced_ok<float>(opk::sum, xs, out[static_cast<size_t>(r)][i]);
  }
  CHECK(wrong == 0);
}

TEST_CASE("topology_table") {
  const topology_table t = topology_table::from_host_ids({7, 3, 7, 3, 3});
  const collcomm::topology& v = t.view();
  CHECK(v.nranks == 5);
  CHECK(v.nhosts == 2);
  CHECK(v.max_local_size() == 3);
  CHECK(v.host(0) == 0);
  CHECK(v.host(1) == 1);
  CHECK(v.local(4) == 2);
  CHECK(v.local_size(0) == 2);
  CHECK(v.rank_at(0, 1) == 2);
  CHECK(v.rank_at(1, 2) == 4);
  const topology_table copy = t;  // a copy carries its own view
  CHECK(copy.view().host_ranks != v.host_ranks);
  CHECK(copy.view().rank_at(1, 1) == 3);
  const topology_table f = topology_table::flat(3);
  CHECK(f.view().nhosts == 1);
  CHECK(f.view().local(2) == 2);

  auto code_of = [](auto&& fn) {
    try {
      fn();
    } catch (const collcomm::error& e) {
      const std::string what = e.what();
      MESSAGE(what);
      return e.code();
    }
    return collcomm::errc::internal;
  };
  CHECK(code_of([] { (void)topology_table::from_host_ids({}); }) == collcomm::errc::invalid_argument);
  CHECK(code_of([] { (void)topology_table::flat(0); }) == collcomm::errc::invalid_argument);
  collcomm::host::world w(2);
  comm_t c(w, 0);
  CHECK(code_of([&] { c.set_topology(std::make_shared<const topology_table>(topology_table::flat(3))); }) ==
        collcomm::errc::invalid_argument);
  c.set_topology(std::make_shared<const topology_table>(topology_table::from_host_ids({1, 2})));
  CHECK(c.topology_view() != nullptr);
  CHECK(c.topology_view()->nhosts == 2);
}
