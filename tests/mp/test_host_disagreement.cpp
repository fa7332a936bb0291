// Ranks that disagree about a call, on the host executor with ranks as forked processes (labels
// mp, fault): a broadcast whose ranks name different roots (FIFO messages) and a one_shot
// all_reduce whose ranks name different ops (buffers staged through the segment's windows). On
// every rank the call throws an error naming the disagreement or returns its own view's result;
// the next call throws, and so does every later one (aborted), outputs untouched; no rank runs
// into the timeout. Inputs are random, fresh each run.
#include "test_host_fork.hpp"

#include <collcomm/host.hpp>

#include <doctest/doctest.h>

#include <algorithm>

using namespace collcomm_test::mp;
namespace cc = collcomm;

namespace {

constexpr float poison = -7777.5f;

std::string describe(const rank_report& r) {
  return "code " + std::to_string(r.code) + ", error code " + std::to_string(r.err_code - 1) + ": " + r.msg;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The inputs of every rank (each child makes them all from the seed, so it knows its view).
std::vector<std::vector<float>> inputs(std::uint64_t seed, int n, std::size_t count) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int> d(-1000, 1000);
  std::vector<std::vector<float>> in(static_cast<std::size_t>(n), std::vector<float>(count));
  for (auto& v : in)
    for (float& x : v) x = static_cast<float>(d(g));
  return in;
}

// Every rank: the disagreeing call `call`, whose result in this rank's view is `view`, then two
// all_reduce calls. Returns 0, or a code from child_fail saying what went wrong; the last error
// seen is in the report.
template <class Call>
int disagree_then_refuse(bs::tcp& boot, rank_report& me, std::uint64_t seed, std::size_t count, Call call,
                         const std::function<std::vector<float>(int, const std::vector<std::vector<float>>&)>& view) {
  cc::host::options opt;
  opt.timeout = 4s;
  opt.window_bytes = std::size_t{1} << 20;
  host_comm comm(boot, opt);
  const int r = comm.rank(), n = comm.size();
  const auto in = inputs(seed, n, count);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> out(count, poison);
  bool returned = true;
  try {
    call(comm, in[static_cast<std::size_t>(r)].data(), out.data());
  } catch (const cc::error& e) {
    record_error(me, e);
    returned = false;
    if (e.code() != cc::errc::invalid_argument && e.code() != cc::errc::aborted)
      return child_fail(me, r, 60, "the call threw code %d: %s", int(e.code()), e.what());
    if (!contains(e.what(), "disagree")) return child_fail(me, r, 61, "the error names no disagreement: %s", e.what());
    for (std::size_t i = 0; i < count; ++i)
      if (out[i] != poison && out[i] != in[static_cast<std::size_t>(r)][i])
        return child_fail(me, r, 62, "output[%zu] = %g after the call threw", i, double(out[i]));
  }
  if (returned && out != view(r, in)) return child_fail(me, r, 63, "the call returned data its view does not give");
  for (int k = 0; k < 2; ++k) {
    std::vector<float> v(count, float(r + 1)), res(count, poison);
    try {
      cc::all_reduce(comm, v.data(), res.data(), count);
      return child_fail(me, r, 64, "later call %d returned", k);
    } catch (const cc::error& e) {
      record_error(me, e);
      const bool finds_it = k == 0 && returned;
      if (!(e.code() == cc::errc::aborted || (finds_it && e.code() == cc::errc::invalid_argument)))
        return child_fail(me, r, 65, "later call %d threw code %d: %s", k, int(e.code()), e.what());
      if (!contains(e.what(), "disagree"))
        return child_fail(me, r, 66, "later call %d: the error names no disagreement: %s", k, e.what());
      for (std::size_t i = 0; i < count; ++i)
        if (res[i] != poison && !(finds_it && res[i] == v[i]))
          return child_fail(me, r, 67, "later call %d: output[%zu] = %g after it threw", k, i, double(res[i]));
    }
  }
  if (std::chrono::steady_clock::now() - t0 > opt.timeout / 2)
    return child_fail(me, r, 68, "took past half the timeout");
  return 0;
}

void check_job(int n, const job& j, reports& rep, const std::vector<std::string>& named) {
  std::string errors;
  for (int r = 0; r < n; ++r) {
    CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "rank " << r << ": " << describe(rep[r]));
    errors += std::string(rep[r].msg) + "\n";
  }
  for (const std::string& s : named) CHECK_MESSAGE(contains(errors, s), "no error names '" << s << "':\n" << errors);
}

}  // namespace

TEST_CASE("disagreement, processes: broadcast with different roots") {
  const auto shm_before = collcomm_segments();
  const int n = 3;
  const std::size_t count = 2000;
  const std::uint64_t seed = fresh_seed("broadcast roots");
  auto root_of = [](int r) { return r == 2 ? 1 : 0; };
  reports rep(n);
  auto j = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        return disagree_then_refuse(
            boot, me, seed, count,
            [&](host_comm& c, const float* in, float* out) { cc::broadcast(c, in, out, count, root_of(c.rank())); },
            [&](int r, const auto& in) { return in[static_cast<std::size_t>(root_of(r))]; });
      },
      rep, 60s);
  check_job(n, j, rep, {"broadcast<ring> root"});
  CHECK(leaked_segments(shm_before, &j.pids).empty());
}

TEST_CASE("disagreement, processes: one_shot all_reduce with sum against max") {
  const auto shm_before = collcomm_segments();
  const int n = 3;
  const std::size_t count = 1000;
  const std::uint64_t seed = fresh_seed("one_shot ops");
  reports rep(n);
  auto j = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        return disagree_then_refuse(
            boot, me, seed, count,
            [&](host_comm& c, const float* in, float* out) {
              if (c.rank() == 1)
                cc::all_reduce<cc::algo::one_shot>(c, in, out, count, cc::op::max{});
              else
                cc::all_reduce<cc::algo::one_shot>(c, in, out, count, cc::op::sum{});
            },
            [&](int r, const auto& in) {
              std::vector<float> v = in[0];
              for (std::size_t q = 1; q < in.size(); ++q)
                for (std::size_t i = 0; i < count; ++i) v[i] = r == 1 ? std::max(v[i], in[q][i]) : v[i] + in[q][i];
              return v;
            });
      },
      rep, 60s);
  check_job(n, j, rep, {"all_reduce<one_shot>", "op "});
  CHECK(leaked_segments(shm_before, &j.pids).empty());
}
