// Bad input to the host API: every check names the argument and the rank, runs before any data
// moves (outputs, poisoned first, stay untouched), and leaves the other ranks failing with a
// timeout rather than hanging when only some ranks pass the bad argument.
#include <collcomm/host.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace {

using collcomm::errc;
using collcomm::index_t;
using comm_t = collcomm::communicator<collcomm::transport::host_shm>;
using std::chrono::milliseconds;

constexpr float poison = -9999.25f;
constexpr int nranks = 4;
constexpr index_t count = 8;
const float* const null_in = nullptr;
float* const null_out = nullptr;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct outcome {
  bool threw = false;
  errc code = errc::internal;
  int rank = collcomm::no_rank;
  std::string what;
  double ms = 0;
};

// Runs f on every rank; records per rank what it threw and how long it took.
std::vector<outcome> run_each(collcomm::host::world& w, const std::function<void(comm_t&)>& f) {
  std::vector<outcome> o(static_cast<std::size_t>(w.size()));
  collcomm::host::run_ranks(w, [&](comm_t& comm) {
    outcome& mine = o[static_cast<std::size_t>(comm.rank())];
    const auto t0 = std::chrono::steady_clock::now();
    try {
      f(comm);
    } catch (const collcomm::error& e) {
      mine.threw = true;
      mine.code = e.code();
      mine.rank = e.rank();
      mine.what = e.what();
    }
    mine.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  });
  return o;
}

void expect_invalid(const outcome& o, int r, const std::string& arg) {
  CAPTURE(r);
  CAPTURE(o.what);
  CHECK(o.threw);
  CHECK(o.code == errc::invalid_argument);
  CHECK(o.rank == r);
  CHECK(contains(o.what, "'" + arg + "'"));
  CHECK(contains(o.what, "on rank " + std::to_string(r) + ":"));
}

// A rank that passed good arguments while a peer did not: it finishes (its messages fit the
// slots) or times out within about twice the timeout; it never hangs and never sees another error.
void expect_finished_or_timed_out(const outcome& o, int r, milliseconds timeout) {
  CAPTURE(r);
  CAPTURE(o.what);
  if (o.threw) {
    CHECK(o.code == errc::timeout);
    CHECK(contains(o.what, "on rank " + std::to_string(r) + ":"));
  }
  CHECK(o.ms < 2.0 * static_cast<double>(timeout.count()) + 400.0);  // slack: CI runs tests side by side
}

struct rank_buffers {
  std::vector<std::vector<float>> send, recv;
  rank_buffers() : send(nranks), recv(nranks) {
    for (int r = 0; r < nranks; ++r) {
      send[r].resize(nranks * count);
      for (index_t i = 0; i < send[r].size(); ++i) send[r][i] = static_cast<float>(100 * r + static_cast<int>(i));
      recv[r].assign(nranks * count, poison);
    }
  }
  bool untouched(int r) const {
    for (index_t i = 0; i < send[r].size(); ++i)
      if (send[r][i] != static_cast<float>(100 * r + static_cast<int>(i))) return false;
    for (float x : recv[r])
      if (x != poison) return false;
    return true;
  }
};

struct bad_case {
  const char* name;
  const char* arg;  // the argument the message must name
  std::function<void(comm_t&, const float* send, float* recv)> call;
};

int next_of(const comm_t& c) { return (c.rank() + 1) % c.size(); }
int prev_of(const comm_t& c) { return (c.rank() + c.size() - 1) % c.size(); }

}  // namespace

TEST_CASE("bad input: world and communicator arguments") {
  auto world_error = [](int n, collcomm::host::options opt) -> std::string {
    try {
      collcomm::host::world w(n, opt);
    } catch (const collcomm::error& e) {
      CHECK(e.code() == errc::invalid_argument);
      return e.what();
    }
    return "no error";
  };
  CHECK(contains(world_error(0, {}), "'nranks' = 0"));
  CHECK(contains(world_error(-1, {}), "'nranks' = -1"));
  CHECK(contains(world_error(collcomm::host::world::max_ranks + 1, {}), "'nranks'"));
  collcomm::host::options o;
  o.channels = 0;
  CHECK(contains(world_error(2, o), "'channels' = 0"));
  o = {};
  o.slots = 0;
  CHECK(contains(world_error(2, o), "'slots' = 0"));
  o = {};
  o.slot_bytes = 8;
  CHECK(contains(world_error(2, o), "'slot_bytes' = 8"));
  o = {};
  o.slot_bytes = 100;  // not a multiple of 16 (the shared rule of collcomm/options.hpp)
  CHECK(contains(world_error(2, o), "'slot_bytes' = 100"));
  o = {};
  o.slots = collcomm::common_options::max_slots + 1;
  CHECK(contains(world_error(2, o), "'slots'"));
  o = {};  // each option in range, their product not: refused before anything is allocated
  o.channels = 64;
  o.slots = collcomm::common_options::max_slots;
  o.slot_bytes = collcomm::common_options::max_slot_bytes;
  CHECK(contains(world_error(2, o), "'channels' x 'slots' x 'slot_bytes'"));
  o = {};
  o.timeout = milliseconds(0);
  CHECK(contains(world_error(2, o), "'timeout' = 0"));
  o = {};
  o.cpus = -1;
  CHECK(contains(world_error(2, o), "'cpus' = -1"));

  collcomm::host::world w(nranks);
  for (int bad : {nranks, nranks + 1, -1}) {
    CAPTURE(bad);
    try {
      comm_t c(w, bad);
      FAIL("no error for rank " << bad);
    } catch (const collcomm::error& e) {
      CHECK(e.code() == errc::invalid_argument);
      CHECK(contains(e.what(), "'rank' = " + std::to_string(bad)));
    }
  }
  comm_t ok(w, nranks - 1);
  CHECK(ok.rank() == nranks - 1);
  CHECK(ok.size() == nranks);
}

TEST_CASE("bad input: every rank passes it — all throw, naming argument and rank; nothing moves") {
  const index_t huge = SIZE_MAX / 2;                                // count * sizeof(float) overflows
  const index_t just_over = PTRDIFF_MAX / sizeof(float) + 1;        // bytes one element past PTRDIFF_MAX
  const index_t over_n = PTRDIFF_MAX / sizeof(float) / nranks + 1;  // fine alone, n * count too large
  auto misaligned = [](const float* p) { return reinterpret_cast<const float*>(reinterpret_cast<const char*>(p) + 1); };
  const std::vector<bad_case> cases = {
      // null buffers where significant
      {"all_reduce null send", "send",
       [](comm_t& c, const float*, float* r) { collcomm::all_reduce(c, null_in, r, count); }},
      {"all_reduce null recv", "recv",
       [](comm_t& c, const float* s, float*) { collcomm::all_reduce(c, s, null_out, count); }},
      {"reduce_scatter null send", "send",
       [](comm_t& c, const float*, float* r) { collcomm::reduce_scatter(c, null_in, r, count); }},
      {"reduce_scatter null recv", "recv",
       [](comm_t& c, const float* s, float*) { collcomm::reduce_scatter(c, s, null_out, count); }},
      {"all_gather null send", "send",
       [](comm_t& c, const float*, float* r) { collcomm::all_gather(c, null_in, r, count); }},
      {"all_gather null recv", "recv",
       [](comm_t& c, const float* s, float*) { collcomm::all_gather(c, s, null_out, count); }},
      {"broadcast null recv", "recv",
       [](comm_t& c, const float* s, float*) { collcomm::broadcast(c, s, null_out, count, 0); }},
      {"reduce null send", "send",
       [](comm_t& c, const float*, float* r) { collcomm::reduce(c, null_in, r, count, collcomm::op::sum{}, 0); }},
      {"all_to_all null send", "send",
       [](comm_t& c, const float*, float* r) { collcomm::all_to_all(c, null_in, r, count); }},
      {"all_to_all null recv", "recv",
       [](comm_t& c, const float* s, float*) { collcomm::all_to_all(c, s, null_out, count); }},
      {"gather null send", "send",
       [](comm_t& c, const float*, float* r) { collcomm::gather(c, null_in, r, count, 1); }},
      {"scatter null recv", "recv",
       [](comm_t& c, const float* s, float*) { collcomm::scatter(c, s, null_out, count, 1); }},
      {"send_recv null send", "send",
       [](comm_t& c, const float*, float* r) { collcomm::send_recv(c, null_in, r, count, next_of(c), prev_of(c)); }},
      {"send_recv null recv", "recv",
       [](comm_t& c, const float* s, float*) { collcomm::send_recv(c, s, null_out, count, next_of(c), prev_of(c)); }},
      {"send null buf", "buf", [](comm_t& c, const float*, float*) { collcomm::send(c, null_in, count, next_of(c)); }},
      {"recv null buf", "buf", [](comm_t& c, const float*, float*) { collcomm::recv(c, null_out, count, prev_of(c)); }},
      // misaligned buffers
      {"all_reduce misaligned send", "send",
       [=](comm_t& c, const float* s, float* r) { collcomm::all_reduce(c, misaligned(s), r, count); }},
      // count * sizeof(T) and n * count * sizeof(T) overflow
      {"all_reduce count overflow", "count",
       [=](comm_t& c, const float* s, float* r) { collcomm::all_reduce(c, s, r, huge); }},
      {"all_reduce count past PTRDIFF_MAX", "count",
       [=](comm_t& c, const float* s, float* r) { collcomm::all_reduce(c, s, r, just_over); }},
      {"broadcast count overflow", "count",
       [=](comm_t& c, const float* s, float* r) { collcomm::broadcast(c, s, r, huge, 0); }},
      {"reduce_scatter n*recvcount overflow", "recvcount",
       [=](comm_t& c, const float* s, float* r) { collcomm::reduce_scatter(c, s, r, over_n); }},
      {"all_gather n*sendcount overflow", "sendcount",
       [=](comm_t& c, const float* s, float* r) { collcomm::all_gather(c, s, r, over_n); }},
      {"all_to_all n*count overflow", "count",
       [=](comm_t& c, const float* s, float* r) { collcomm::all_to_all(c, s, r, over_n); }},
      {"gather n*count overflow", "count",
       [=](comm_t& c, const float* s, float* r) { collcomm::gather(c, s, r, over_n, 0); }},
      {"scatter n*count overflow", "count",
       [=](comm_t& c, const float* s, float* r) { collcomm::scatter(c, s, r, over_n, 0); }},
      {"send_recv count overflow", "count",
       [=](comm_t& c, const float* s, float* r) { collcomm::send_recv(c, s, r, huge, next_of(c), prev_of(c)); }},
      // root out of range
      {"broadcast root = n", "root",
       [](comm_t& c, const float* s, float* r) { collcomm::broadcast(c, s, r, count, nranks); }},
      {"broadcast root = -1", "root",
       [](comm_t& c, const float* s, float* r) { collcomm::broadcast(c, s, r, count, -1); }},
      {"reduce root = n", "root",
       [](comm_t& c, const float* s, float* r) { collcomm::reduce(c, s, r, count, collcomm::op::max{}, nranks); }},
      {"gather root = 7", "root", [](comm_t& c, const float* s, float* r) { collcomm::gather(c, s, r, count, 7); }},
      {"scatter root = -3", "root", [](comm_t& c, const float* s, float* r) { collcomm::scatter(c, s, r, count, -3); }},
      // peers
      {"send_recv send_peer = n", "send_peer",
       [](comm_t& c, const float* s, float* r) { collcomm::send_recv(c, s, r, count, nranks, prev_of(c)); }},
      {"send_recv recv_peer = -2", "recv_peer",
       [](comm_t& c, const float* s, float* r) { collcomm::send_recv(c, s, r, count, next_of(c), -2); }},
      {"send_recv to self, receive from another", "send_peer",
       [](comm_t& c, const float* s, float* r) { collcomm::send_recv(c, s, r, count, c.rank(), prev_of(c)); }},
      {"send to n", "peer", [](comm_t& c, const float* s, float*) { collcomm::send(c, s, count, nranks); }},
      {"send to self", "peer", [](comm_t& c, const float* s, float*) { collcomm::send(c, s, count, c.rank()); }},
      {"recv from no_peer", "peer",
       [](comm_t& c, const float*, float* r) { collcomm::recv(c, r, count, collcomm::no_peer); }},
      // an algorithm that cannot run in place, in place
      {"one_shot in place", "recv",
       [](comm_t& c, const float*, float* r) { collcomm::all_reduce<collcomm::algo::one_shot>(c, r, r, count); }},
  };
  collcomm::host::world w(nranks);
  for (const bad_case& bc : cases) {
    CAPTURE(bc.name);
    rank_buffers b;
    const auto o = run_each(w, [&](comm_t& c) { bc.call(c, b.send[c.rank()].data(), b.recv[c.rank()].data()); });
    for (int r = 0; r < nranks; ++r) {
      expect_invalid(o[r], r, bc.arg);
      CHECK(b.untouched(r));
    }
  }
  // Argument errors moved nothing: the same world still computes right.
  rank_buffers b;
  const auto o =
      run_each(w, [&](comm_t& c) { collcomm::all_reduce(c, b.send[c.rank()].data(), b.recv[c.rank()].data(), count); });
  for (int r = 0; r < nranks; ++r) {
    CHECK_FALSE(o[r].threw);
    for (index_t i = 0; i < count; ++i) CHECK(b.recv[r][i] == static_cast<float>(600 + 4 * static_cast<int>(i)));
  }
}

TEST_CASE("bad input: overlapping send and recv other than in place") {
  // One buffer per rank holds both arguments; it must come back unchanged.
  struct overlap_case {
    const char* name;
    std::function<void(comm_t&, float* buf)> call;
  };
  const std::vector<overlap_case> cases = {
      {"all_reduce recv = send + 1", [](comm_t& c, float* b) { collcomm::all_reduce(c, b, b + 1, count); }},
      {"all_reduce send = recv + 3", [](comm_t& c, float* b) { collcomm::all_reduce(c, b + 3, b, count); }},
      {"reduce_scatter recv in another rank's block",
       [](comm_t& c, float* b) { collcomm::reduce_scatter(c, b, b + next_of(c) * count, count); }},
      {"all_gather send in another rank's block",
       [](comm_t& c, float* b) { collcomm::all_gather(c, b + next_of(c) * count, b, count); }},
      {"all_to_all in place", [](comm_t& c, float* b) { collcomm::all_to_all(c, b, b, count / nranks); }},
      {"all_to_all partial overlap", [](comm_t& c, float* b) { collcomm::all_to_all(c, b, b + 2, 1); }},
      {"send_recv in place", [](comm_t& c, float* b) { collcomm::send_recv(c, b, b, count, next_of(c), prev_of(c)); }},
      {"broadcast shifted (every rank is checked: recv is significant everywhere, send at the root 0)",
       [](comm_t& c, float* b) { collcomm::broadcast(c, b, c.rank() == 0 ? b + 1 : b, count, 0); }},
  };
  collcomm::host::world w(nranks);
  for (const overlap_case& oc : cases) {
    CAPTURE(oc.name);
    std::vector<std::vector<float>> buf(nranks);
    for (int r = 0; r < nranks; ++r) {
      buf[r].resize(nranks * count + 8);
      for (index_t i = 0; i < buf[r].size(); ++i) buf[r][i] = poison + static_cast<float>(i);
    }
    const bool only_root = contains(oc.name, "broadcast");
    const auto o = run_each(w, [&](comm_t& c) {
      // broadcast: the non-roots' send is ignored, so only the root sees an overlap; give the
      // others separate buffers so that the call there would be valid but never starts moving
      // data before the root (the root throws; they time out or finish: see the next test).
      if (only_root && c.rank() != 0) return;
      oc.call(c, buf[c.rank()].data());
    });
    for (int r = 0; r < nranks; ++r) {
      if (only_root && r != 0) continue;
      CAPTURE(r);
      CAPTURE(o[r].what);
      CHECK(o[r].code == errc::invalid_argument);
      CHECK(contains(o[r].what, "arguments 'send'"));
      CHECK(contains(o[r].what, "'recv'"));
      CHECK(contains(o[r].what, "on rank " + std::to_string(r) + ":"));
      for (index_t i = 0; i < buf[r].size(); ++i) CHECK(buf[r][i] == poison + static_cast<float>(i));
    }
  }
}

TEST_CASE("bad input: in-place positions and ignored buffers are accepted") {
  collcomm::host::world w(nranks);
  // reduce_scatter in place: recv == send + rank * recvcount.
  std::vector<std::vector<std::int32_t>> buf(nranks, std::vector<std::int32_t>(nranks * count));
  for (int r = 0; r < nranks; ++r)
    for (index_t i = 0; i < buf[r].size(); ++i) buf[r][i] = static_cast<std::int32_t>(1000 * r + i);
  auto o = run_each(w, [&](comm_t& c) {
    collcomm::reduce_scatter(c, buf[c.rank()].data(), buf[c.rank()].data() + c.rank() * count, count);
  });
  for (int r = 0; r < nranks; ++r) {
    CHECK_FALSE(o[r].threw);
    for (index_t i = 0; i < count; ++i)
      CHECK(buf[r][r * count + i] == static_cast<std::int32_t>(6000 + nranks * (r * count + i)));
  }
  // Buffers that are not significant on a rank may be null there.
  const int root = 2;
  std::vector<std::vector<std::int32_t>> in(nranks, std::vector<std::int32_t>(nranks * count)), out(nranks);
  for (int r = 0; r < nranks; ++r) {
    for (index_t i = 0; i < in[r].size(); ++i) in[r][i] = static_cast<std::int32_t>(10 * r + i);
    out[r].assign(nranks * count, -1);
  }
  o = run_each(w, [&](comm_t& c) {
    const int r = c.rank();
    const bool is_root = r == root;
    const std::int32_t* s = in[r].data();
    std::int32_t* d = out[r].data();
    collcomm::reduce(c, s, is_root ? d : nullptr, count, collcomm::op::sum{}, root);
    collcomm::broadcast(c, is_root ? s : nullptr, d + count, count, root);
    collcomm::gather(c, s, is_root ? d + 0 : nullptr, index_t{0}, root);  // count 0: nothing significant
    collcomm::send_recv(c, static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), count,
                        collcomm::no_peer, collcomm::no_peer);
    collcomm::all_reduce(c, static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), index_t{0});
  });
  for (int r = 0; r < nranks; ++r) {
    CAPTURE(r);
    CHECK_FALSE(o[r].threw);
    CAPTURE(o[r].what);
    for (index_t i = 0; i < count; ++i) {
      if (r == root)
        CHECK(out[r][i] == static_cast<std::int32_t>(60 + nranks * i));
      else
        CHECK(out[r][i] == -1);
      CHECK(out[r][count + i] == static_cast<std::int32_t>(10 * root + i));
    }
  }
}

TEST_CASE("bad input: only the root's root-only buffer is bad — the root throws, the others do not hang") {
  collcomm::host::options opt;
  opt.timeout = milliseconds(200);
  struct root_case {
    const char* name;
    const char* arg;
    std::function<void(comm_t&, const float*, float*)> call;
  };
  const int root = 1;
  const std::vector<root_case> cases = {
      {"broadcast: null send at the root", "send",
       [](comm_t& c, const float*, float* r) { collcomm::broadcast(c, null_in, r, count, root); }},
      {"reduce: null recv at the root", "recv",
       [](comm_t& c, const float* s, float*) { collcomm::reduce(c, s, null_out, count, collcomm::op::sum{}, root); }},
      {"gather: null recv at the root", "recv",
       [](comm_t& c, const float* s, float*) { collcomm::gather(c, s, null_out, count, root); }},
      {"scatter: null send at the root", "send",
       [](comm_t& c, const float*, float* r) { collcomm::scatter(c, null_in, r, count, root); }},
      {"gather: overlap at the root", "recv",
       [](comm_t& c, const float* s, float* r) {
         float* d = c.rank() == root ? const_cast<float*>(s) + 1 : r;  // not send == recv + root * count
         collcomm::gather(c, s, d, count, root);
       }},
  };
  for (const root_case& rc : cases) {
    CAPTURE(rc.name);
    collcomm::host::world w(nranks, opt);  // a timeout marks a world failed: one world per case
    rank_buffers b;
    const auto o = run_each(w, [&](comm_t& c) { rc.call(c, b.send[c.rank()].data(), b.recv[c.rank()].data()); });
    expect_invalid(o[root], root, rc.arg);
    CHECK(b.untouched(root));
    for (int r = 0; r < nranks; ++r)
      if (r != root) expect_finished_or_timed_out(o[r], r, opt.timeout);
  }
}

TEST_CASE("bad input: a single bad rank throws at once; the others time out within about 2x the timeout") {
  collcomm::host::options opt;
  opt.timeout = milliseconds(250);
  collcomm::host::world w(nranks, opt);
  const int bad = 1;
  rank_buffers b;
  const auto o = run_each(w, [&](comm_t& c) {
    const int r = c.rank();
    collcomm::all_reduce<collcomm::algo::ring>(c, b.send[r].data(), r == bad ? null_out : b.recv[r].data(), count);
  });
  expect_invalid(o[bad], bad, "recv");
  CHECK(o[bad].ms < static_cast<double>(opt.timeout.count()));  // it did not wait
  CHECK(b.untouched(bad));
  for (int r = 0; r < nranks; ++r) {
    if (r == bad) continue;
    CAPTURE(r);
    CAPTURE(o[r].what);
    CHECK(o[r].threw);
    CHECK(o[r].code == errc::timeout);
    expect_finished_or_timed_out(o[r], r, opt.timeout);
  }
  // The rank after the bad one in the ring waits on it, and says so.
  CHECK(contains(o[(bad + 1) % nranks].what, "from rank " + std::to_string(bad)));

  // The timeout marked the world failed: every later call says so at once.
  const auto later =
      run_each(w, [&](comm_t& c) { collcomm::all_reduce(c, b.send[c.rank()].data(), b.recv[c.rank()].data(), count); });
  for (int r = 0; r < nranks; ++r) {
    CAPTURE(later[r].what);
    CHECK(later[r].code == errc::aborted);
    CHECK(contains(later[r].what, "timed out"));
    CHECK(later[r].ms < static_cast<double>(opt.timeout.count()));
  }
}

TEST_CASE("bad input: a rank that retries with good arguments lets every rank finish") {
  collcomm::host::world w(nranks);
  const int bad = 3;
  rank_buffers b;
  const auto o = run_each(w, [&](comm_t& c) {
    const int r = c.rank();
    if (r == bad) {
      try {
        collcomm::all_reduce(c, b.send[r].data(), null_out, count);
      } catch (const collcomm::error& e) {
        CHECK(e.code() == errc::invalid_argument);
      }
    }
    collcomm::all_reduce(c, b.send[r].data(), b.recv[r].data(), count);
  });
  for (int r = 0; r < nranks; ++r) {
    CHECK_FALSE(o[r].threw);
    for (index_t i = 0; i < count; ++i) CHECK(b.recv[r][i] == static_cast<float>(600 + 4 * static_cast<int>(i)));
  }
}

TEST_CASE("bad input: ranks that disagree on count or element type get an error, not wrong data") {
  collcomm::host::options opt;
  opt.timeout = milliseconds(200);
  SUBCASE("count") {
    collcomm::host::world w(nranks, opt);
    std::vector<std::vector<float>> in(nranks, std::vector<float>(200, 1.0f)),
        out(nranks, std::vector<float>(200, poison));
    const auto o = run_each(w, [&](comm_t& c) {
      const index_t n = c.rank() == 0 ? 100 : 101;
      collcomm::all_reduce(c, in[c.rank()].data(), out[c.rank()].data(), n);
    });
    int mismatch = 0;
    for (int r = 0; r < nranks; ++r) {
      CAPTURE(o[r].what);
      CHECK(o[r].threw);
      if (o[r].code == errc::invalid_argument) {
        ++mismatch;
        CHECK(contains(o[r].what, "disagree"));
        CHECK(contains(o[r].what, "from rank "));
        CHECK(contains(o[r].what, "on rank " + std::to_string(r) + ":"));
      } else {  // woken by the rank that found it
        CHECK(o[r].code == errc::aborted);
        CHECK(contains(o[r].what, "disagree"));
      }
    }
    CHECK(mismatch > 0);
  }
  SUBCASE("element type") {
    collcomm::host::world w(nranks, opt);
    std::vector<std::vector<float>> f(nranks, std::vector<float>(64, 1.0f));
    std::vector<std::vector<std::int32_t>> i(nranks, std::vector<std::int32_t>(64, 1));
    const auto o = run_each(w, [&](comm_t& c) {
      const int r = c.rank();
      if (r == 0)
        collcomm::all_reduce(c, f[r].data(), f[r].data(), index_t{64});
      else
        collcomm::all_reduce(c, i[r].data(), i[r].data(), index_t{64});
    });
    int mismatch = 0;
    for (int r = 0; r < nranks; ++r) {
      CAPTURE(o[r].what);
      CHECK(o[r].threw);
      if (o[r].code == errc::invalid_argument) {
        ++mismatch;
        CHECK(contains(o[r].what, "f32"));
        CHECK(contains(o[r].what, "i32"));
      }
    }
    CHECK(mismatch > 0);
  }
}
