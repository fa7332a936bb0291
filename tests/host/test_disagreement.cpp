// Ranks that disagree about a call (root, algorithm, kind, op, count) on the host executor, ranks
// as threads (labels host, fault). In every case, on every rank:
//   * the disagreeing call either throws an error that names the disagreement (invalid_argument on
//     a rank that found it, aborted on a rank woken by it), writing nothing of a peer's data, or
//     returns what that rank's own view of the call gives (its part completed on messages of
//     peers that agree with it);
//   * the next call throws (invalid_argument only where the disagreeing call returned: this call
//     is where it is found), and so does every later one (aborted), outputs untouched;
//   * nothing runs into the timeout: the ranks that wait are woken.
// The calls name algo::ring (all but the cases that set two algorithms against each other): the
// cases' expectations — that nothing of a peer's lands in a throwing call's output, and which rank
// names which — follow the ring's schedule, whose first read of every call is where a rank meets
// the other call. recursive_doubling, for one, may have combined an agreeing peer's data before it
// meets a disagreeing one. algo::automatic's arms against a named algorithm have their own case.
// Outputs are poisoned before every call; inputs are random integers (exact in float), fresh each
// run. Point-to-point calls do not count as collective calls, and a p2p message is never taken for
// a collective's.
#include <collcomm/host.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

namespace cc = collcomm;
using cc::errc;
using cc::index_t;
using comm_t = cc::communicator<cc::transport::host_shm>;
using std::chrono::milliseconds;

constexpr float poison = -7777.5f;
constexpr index_t later_count = 64;
constexpr int later_calls = 2;
constexpr milliseconds timeout{4000};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::uint64_t fresh_seed() {
  std::random_device rd;
  const std::uint64_t s = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  std::printf("test_disagreement: seed = %llu\n", static_cast<unsigned long long>(s));
  return s;
}

std::vector<float> random_values(std::mt19937_64& g, index_t n) {
  std::uniform_int_distribution<int> d(-1000, 1000);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(g));
  return v;
}

struct outcome {
  bool threw = false;
  errc code = errc::internal;
  std::string what;
};

template <class F>
outcome attempt(F&& f) {
  outcome o;
  try {
    f();
  } catch (const cc::error& e) {
    o.threw = true;
    o.code = e.code();
    o.what = e.what();
  }
  return o;
}

const char* code_name(errc c) {
  switch (c) {
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::aborted:
      return "aborted";
    case errc::timeout:
      return "timeout";
    case errc::invalid_usage:
      return "invalid_usage";
    default:
      return "another code";
  }
}

// in, out: this rank's buffers of `elems` elements; in views: every rank's input.
using call_fn = std::function<void(comm_t&, const float* in, float* out)>;
using view_fn = std::function<std::vector<float>(int rank, const std::vector<std::vector<float>>& in)>;

struct disagreement {
  int nranks;
  index_t elems;                   // each rank's buffers
  call_fn call;                    // the disagreeing call, as rank comm.rank() makes it
  view_fn view;                    // what that call gives on `rank` if it completes (the rank's own view)
  std::vector<std::string> named;  // each named by some rank's error
};

// Every rank: a good all_reduce, the disagreeing call, then later_calls all_reduce calls.
void check(const disagreement& d) {
  std::mt19937_64 g(fresh_seed());
  const int n = d.nranks;
  const auto un = static_cast<std::size_t>(n);
  std::vector<std::vector<float>> in(un), out(un, std::vector<float>(d.elems, poison));
  for (auto& v : in) v = random_values(g, d.elems);
  std::vector<std::vector<std::vector<float>>> later_in(un), later_out(un);
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < later_calls; ++k) {
      later_in[r].push_back(random_values(g, later_count));
      later_out[r].emplace_back(later_count, poison);
    }
  std::vector<outcome> warm(un), bad(un);
  std::vector<std::vector<outcome>> later(un, std::vector<outcome>(later_calls));
  std::vector<double> ms(un);

  cc::host::options opt;
  opt.timeout = timeout;
  cc::host::world w(n, opt);
  // Every rank leaves the warm-up before any makes the disagreeing call: a rank still finishing
  // the warm-up when a peer found the disagreement would take the abort there (a ring's last
  // receive can come after its peers went on).
  std::barrier warmed(n);
  cc::host::run_ranks(w, [&](comm_t& comm) {
    const int r = comm.rank();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> one(8, static_cast<float>(r + 1));
    warm[r] = attempt([&] {
      cc::all_reduce<cc::algo::ring>(comm, one.data(), one.data(), one.size());
      if (one[0] != static_cast<float>(n * (n + 1) / 2)) throw cc::error(errc::internal, r, "warm-up: wrong sum");
    });
    warmed.arrive_and_wait();
    bad[r] = attempt([&] { d.call(comm, in[r].data(), out[r].data()); });
    for (int k = 0; k < later_calls; ++k)
      later[r][k] = attempt([&] { cc::all_reduce<cc::algo::ring>(comm, later_in[r][k].data(), later_out[r][k].data(), later_count); });
    ms[r] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  });

  std::string errors;  // every error text of the run
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE_MESSAGE(!warm[r].threw, warm[r].what);
    const outcome& b = bad[r];
    CAPTURE(b.what);
    if (b.threw) {
      errors += b.what + "\n";
      CHECK_MESSAGE((b.code == errc::invalid_argument || b.code == errc::aborted), code_name(b.code));
      CHECK(contains(b.what, "disagree"));
      if (b.code == errc::invalid_argument) {
        CHECK(contains(b.what, "on rank " + std::to_string(r) + ":"));
        CHECK(contains(b.what, "belongs to rank "));
      }
      for (index_t i = 0; i < d.elems; ++i)  // nothing of a peer's: poison, or a local copy of the input
        if (out[r][i] != poison && out[r][i] != in[r][i]) {
          FAIL_CHECK("output[" << i << "] = " << out[r][i] << " after the call threw");
          break;
        }
    } else {
      const std::vector<float> want = d.view(r, in);
      for (index_t i = 0; i < d.elems; ++i)
        if (out[r][i] != want[i]) {
          FAIL_CHECK("the call returned, and output[" << i << "] = " << out[r][i] << " where its view gives "
                                                      << want[i]);
          break;
        }
    }
    for (int k = 0; k < later_calls; ++k) {
      const outcome& o = later[r][k];
      CAPTURE(k);
      CAPTURE(o.what);
      CHECK_MESSAGE(o.threw, "a call after the disagreement returned");
      if (!o.threw) continue;
      errors += o.what + "\n";
      const bool finds_it = k == 0 && !b.threw;  // the call in which a returned rank meets the stale message
      CHECK_MESSAGE(
          (o.code == errc::aborted || o.code == errc::invalid_usage || (finds_it && o.code == errc::invalid_argument)),
          code_name(o.code));
      CHECK(contains(o.what, "disagree"));
      for (index_t i = 0; i < later_count; ++i)
        if (later_out[r][k][i] != poison && !(finds_it && later_out[r][k][i] == later_in[r][k][i])) {
          FAIL_CHECK("later call " << k << ": output[" << i << "] = " << later_out[r][k][i] << " after it threw");
          break;
        }
    }
    CHECK_MESSAGE(ms[r] < static_cast<double>(timeout.count()) / 2, "rank " << r << " took " << ms[r] << " ms");
  }
  for (const std::string& s : d.named) CHECK_MESSAGE(contains(errors, s), "no error names '" << s << "':\n" << errors);
}

// Views of one call, as a rank that makes it sees the result.
std::vector<float> reduced(const std::vector<std::vector<float>>& in, index_t count, index_t elems, bool max) {
  std::vector<float> v(elems, poison);
  for (index_t i = 0; i < count; ++i) {
    v[i] = in[0][i];
    for (std::size_t r = 1; r < in.size(); ++r) v[i] = max ? std::max(v[i], in[r][i]) : v[i] + in[r][i];
  }
  return v;
}
std::vector<float> copied(const std::vector<float>& from, index_t count, index_t elems) {
  std::vector<float> v(elems, poison);
  std::copy_n(from.begin(), count, v.begin());
  return v;
}

}  // namespace

TEST_CASE("disagreement: broadcast with different roots") {
  SUBCASE("2 ranks, each its own root: both return, the next call finds the stale messages") {
    const index_t count = 1000;
    check({2,
           count,
           [](comm_t& c, const float* in, float* out) { cc::broadcast<cc::algo::ring>(c, in, out, count, c.rank()); },
           [](int r, const auto& in) { return copied(in[r], count, count); },
           {"broadcast<ring> root"}});
  }
  SUBCASE("4 ranks, one of them names another root") {
    const index_t count = 3000;
    auto root_of = [](int r) { return r == 3 ? 2 : 0; };
    check({4,
           count,
           [=](comm_t& c, const float* in, float* out) { cc::broadcast<cc::algo::ring>(c, in, out, count, root_of(c.rank())); },
           [=](int r, const auto& in) { return copied(in[root_of(r)], count, count); },
           {"broadcast<ring> root 0, 3000 x f32", "broadcast<ring> root 2, 3000 x f32"}});
  }
  SUBCASE("tree, 3 ranks, every rank its own root") {
    const index_t count = 200;
    check({3,
           count,
           [](comm_t& c, const float* in, float* out) { cc::broadcast<cc::algo::tree>(c, in, out, count, c.rank()); },
           [](int r, const auto& in) { return copied(in[r], count, count); },
           {"broadcast<tree> root"}});
  }
}

TEST_CASE("disagreement: ring against tree all_reduce") {
  const index_t count = 777;
  auto view = [](int, const auto& in) { return reduced(in, count, count, false); };
  SUBCASE("2 ranks") {
    check({2,
           count,
           [](comm_t& c, const float* in, float* out) {
             if (c.rank() == 0)
               cc::all_reduce<cc::algo::ring>(c, in, out, count);
             else
               cc::all_reduce<cc::algo::tree>(c, in, out, count);
           },
           view,
           {"all_reduce<ring>", "all_reduce<tree>"}});
  }
  SUBCASE("4 ranks, half and half") {
    check({4,
           count,
           [](comm_t& c, const float* in, float* out) {
             if (c.rank() < 2)
               cc::all_reduce<cc::algo::ring>(c, in, out, count);
             else
               cc::all_reduce<cc::algo::tree>(c, in, out, count);
           },
           view,
           {"all_reduce<"}});
  }
}

// algo::automatic runs its arm under the arm's own name: a rank whose table picks tree meets a
// rank that named ring as it would with tree named, and the error names both algorithms.
TEST_CASE("disagreement: automatic's arm against a named algorithm") {
  using tree_table = cc::rule_table<cc::rule<cc::kind::all_reduce, cc::when{}, cc::algo::tree>>;
  const index_t count = 777;
  check({3,
         count,
         [](comm_t& c, const float* in, float* out) {
           if (c.rank() == 0)
             cc::all_reduce<cc::algo::ring>(c, in, out, count);
           else
             cc::all_reduce<cc::algo::automatic<tree_table>>(c, in, out, count);
         },
         [](int, const auto& in) { return reduced(in, count, count, false); },
         {"all_reduce<ring>", "all_reduce<tree>"}});
}

TEST_CASE("disagreement: all_reduce against broadcast") {
  const index_t count = 500;
  check({3,
         count,
         [](comm_t& c, const float* in, float* out) {
           if (c.rank() == 1)
             cc::broadcast<cc::algo::ring>(c, in, out, count, 1);
           else
             cc::all_reduce<cc::algo::ring>(c, in, out, count);
         },
         [](int r, const auto& in) { return r == 1 ? copied(in[1], count, count) : reduced(in, count, count, false); },
         {"broadcast<ring> root 1", "all_reduce<ring>"}});
}

TEST_CASE("disagreement: sum against max") {
  const index_t count = 1500;
  auto max_rank = [](int r) { return r == 2; };
  auto call = [=](comm_t& c, const float* in, float* out) {
    if (max_rank(c.rank()))
      cc::all_reduce<cc::algo::ring>(c, in, out, count, cc::op::max{});
    else
      cc::all_reduce<cc::algo::ring>(c, in, out, count, cc::op::sum{});
  };
  auto view = [=](int r, const auto& in) { return reduced(in, count, count, max_rank(r)); };
  SUBCASE("ring") { check({4, count, call, view, {"op sum", "op max"}}); }
  SUBCASE("tree") {
    check({4,
           count,
           [=](comm_t& c, const float* in, float* out) {
             if (max_rank(c.rank()))
               cc::all_reduce<cc::algo::tree>(c, in, out, count, cc::op::max{});
             else
               cc::all_reduce<cc::algo::tree>(c, in, out, count, cc::op::sum{});
           },
           view,
           {"op sum", "op max"}});
  }
}

TEST_CASE("disagreement: different counts") {
  SUBCASE("all_reduce, one rank one element more") {
    const index_t elems = 1025;
    auto count_of = [](int r) { return r == 1 ? index_t{1025} : index_t{1024}; };
    check({4,
           elems,
           [=](comm_t& c, const float* in, float* out) { cc::all_reduce<cc::algo::ring>(c, in, out, count_of(c.rank())); },
           [=](int r, const auto& in) { return reduced(in, count_of(r), elems, false); },
           {"1024 x f32", "1025 x f32"}});
  }
  SUBCASE("broadcast, one rank half the count") {
    const index_t elems = 4096;
    auto count_of = [](int r) { return r == 2 ? index_t{2048} : index_t{4096}; };
    check({3,
           elems,
           [=](comm_t& c, const float* in, float* out) { cc::broadcast<cc::algo::ring>(c, in, out, count_of(c.rank()), 0); },
           [=](int r, const auto& in) { return copied(in[0], count_of(r), elems); },
           {"2048 x f32", "4096 x f32"}});
  }
}

TEST_CASE("disagreement: direct algorithms") {
  SUBCASE("one_shot, different counts") {
    const index_t elems = 512;
    auto count_of = [](int r) { return r == 1 ? index_t{500} : index_t{512}; };
    check({4,
           elems,
           [=](comm_t& c, const float* in, float* out) {
             cc::all_reduce<cc::algo::one_shot>(c, in, out, count_of(c.rank()));
           },
           [=](int r, const auto& in) { return reduced(in, count_of(r), elems, false); },
           {"all_reduce<one_shot>", "500 x f32", "512 x f32"}});
  }
  SUBCASE("one_shot, sum against max") {
    const index_t count = 300;
    check({3,
           count,
           [](comm_t& c, const float* in, float* out) {
             if (c.rank() == 0)
               cc::all_reduce<cc::algo::one_shot>(c, in, out, count, cc::op::max{});
             else
               cc::all_reduce<cc::algo::one_shot>(c, in, out, count, cc::op::sum{});
           },
           [](int r, const auto& in) { return reduced(in, count, count, r == 0); },
           {"all_reduce<one_shot>", "op max", "op sum"}});
  }
  SUBCASE("one_shot against ring: the ring's messages reach ranks waiting at one_shot's barrier") {
    const index_t count = 640;
    check({3,
           count,
           [](comm_t& c, const float* in, float* out) {
             if (c.rank() == 1)
               cc::all_reduce<cc::algo::ring>(c, in, out, count);
             else
               cc::all_reduce<cc::algo::one_shot>(c, in, out, count);
           },
           [](int, const auto& in) { return reduced(in, count, count, false); },
           {"all_reduce<one_shot>", "all_reduce<ring>"}});
  }
  SUBCASE("two_shot, sum against max") {
    const index_t count = 1000;
    check({4,
           count,
           [](comm_t& c, const float* in, float* out) {
             if (c.rank() == 3)
               cc::all_reduce<cc::algo::two_shot>(c, in, out, count, cc::op::max{});
             else
               cc::all_reduce<cc::algo::two_shot>(c, in, out, count, cc::op::sum{});
           },
           [](int r, const auto& in) { return reduced(in, count, count, r == 3); },
           {"all_reduce<two_shot>", "op max", "op sum"}});
  }
}

// one_shot of at most host::world::flat_bytes goes through the ranks' mailboxes (no exposure, no
// barrier at the end): the same disagreements found there, and against ranks at a barrier.
TEST_CASE("disagreement: small direct calls through the mailboxes") {
  SUBCASE("different counts, both small") {
    const index_t elems = 120;
    auto count_of = [](int r) { return r == 2 ? index_t{100} : index_t{120}; };
    check({3,
           elems,
           [=](comm_t& c, const float* in, float* out) {
             cc::all_reduce<cc::algo::one_shot>(c, in, out, count_of(c.rank()));
           },
           [=](int r, const auto& in) { return reduced(in, count_of(r), elems, false); },
           {"all_reduce<one_shot>", "100 x f32", "120 x f32"}});
  }
  SUBCASE("sum against max") {
    const index_t count = 64;
    check({4,
           count,
           [](comm_t& c, const float* in, float* out) {
             if (c.rank() == 1)
               cc::all_reduce<cc::algo::one_shot>(c, in, out, count, cc::op::max{});
             else
               cc::all_reduce<cc::algo::one_shot>(c, in, out, count, cc::op::sum{});
           },
           [](int r, const auto& in) { return reduced(in, count, count, r == 1); },
           {"all_reduce<one_shot>", "op max", "op sum"}});
  }
  SUBCASE("a small call against a large one: mailboxes against a barrier") {
    const index_t elems = 1000;
    auto count_of = [](int r) { return r == 0 ? index_t{1000} : index_t{64}; };
    check({3,
           elems,
           [=](comm_t& c, const float* in, float* out) {
             cc::all_reduce<cc::algo::one_shot>(c, in, out, count_of(c.rank()));
           },
           [=](int r, const auto& in) { return reduced(in, count_of(r), elems, false); },
           {"all_reduce<one_shot>", "64 x f32", "1000 x f32"}});
  }
  SUBCASE("against ring") {
    const index_t count = 32;
    check({2,
           count,
           [](comm_t& c, const float* in, float* out) {
             if (c.rank() == 0)
               cc::all_reduce<cc::algo::ring>(c, in, out, count);
             else
               cc::all_reduce<cc::algo::one_shot>(c, in, out, count);
           },
           [](int, const auto& in) { return reduced(in, count, count, false); },
           {"all_reduce<one_shot>", "all_reduce<ring>"}});
  }
}

TEST_CASE("disagreement: a send against a collective") {
  // Rank 0's send completes without a receive; rank 1's all_reduce meets the p2p message.
  const index_t count = 256;
  check({2,
         count,
         [](comm_t& c, const float* in, float* out) {
           if (c.rank() == 0)
             cc::send(c, in, count, 1);
           else
             cc::all_reduce<cc::algo::ring>(c, in, out, count);
         },
         [](int, const auto&) { return std::vector<float>(count, poison); },
         {"send_recv<p2p>", "all_reduce<ring>"}});
}

TEST_CASE("disagreement: point-to-point calls between some ranks are not collective calls") {
  // Ranks 0 and 1 exchange messages (plain calls and a group) that ranks 2 and 3 take no part in;
  // the collectives around them still agree on every rank.
  std::mt19937_64 g(fresh_seed());
  const int n = 4;
  const index_t count = 333;
  std::vector<std::vector<float>> in(n), out(n, std::vector<float>(count, poison));
  for (auto& v : in) v = random_values(g, count);
  std::vector<std::vector<float>> got(n, std::vector<float>(count, poison));
  cc::host::options opt;
  opt.timeout = timeout;
  cc::host::world w(n, opt);
  std::vector<outcome> o(n);
  cc::host::run_ranks(w, [&](comm_t& c) {
    const int r = c.rank();
    o[r] = attempt([&] {
      for (int k = 0; k < 3; ++k) {
        if (r == 0) cc::send(c, in[r].data(), count, 1);
        if (r == 1) cc::recv(c, got[r].data(), count, 0);
        cc::all_reduce<cc::algo::ring>(c, in[r].data(), out[r].data(), count);
        if (r < 2)
          cc::group([&] {
            cc::send(c, in[r].data(), count, 1 - r);
            cc::recv(c, got[r].data(), count, 1 - r);
          });
        cc::broadcast<cc::algo::ring>(c, in[r].data(), out[r].data(), count, k % n);
      }
    });
  });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK_MESSAGE(!o[r].threw, o[r].what);
    CHECK(out[r] == copied(in[2], count, count));
    if (r < 2) CHECK(got[r] == in[1 - r]);
  }
}
