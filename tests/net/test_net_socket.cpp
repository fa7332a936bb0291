// tests/net/test_net_socket.cpp — communicator<net<socket>> with its ranks on separate hosts made
// of network namespaces (netns.hpp), one process per rank:
//   - every kind x every FIFO algorithm with host buffers, checked element by element against the
//     exact reference (mp/test_host_matrix.hpp), on 2 hosts x 2 ranks, 3 x 1, 2 x 3 and 2 x 3
//     placed round robin, with small slots, 1..4 slots, 1..3 streams, 1..2 channels; the host ids
//     the communicator gathers group the ranks by namespace (given, and derived), each rank
//     listens on its host's address, and its connections reach the other host;
//   - a link cut in the middle of a call: every rank ends with an error naming a rank across the
//     cut, within a bound;
//   - a rank killed (SIGKILL) in the middle of a loop of calls: every survivor ends with an error
//     naming it, within a bound;
//   - a rank that disagrees (another broadcast root, another all_reduce count): every rank ends
//     with an error, none hangs;
//   - bogus connections to every rank's listener (idle, garbage, hellos with a wrong MAC, partial
//     hellos) from another host while the job runs: they are dropped unanswered, and the job's
//     calls complete with the right results.
#include "mp/test_host_matrix.hpp"
#include "net/netns.hpp"

#include <collcomm/net.hpp>

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <csignal>
#include <map>
#include <regex>
#include <set>

COLLCOMM_NET_SKIP_WITHOUT_NETNS();

namespace {

using namespace std::chrono_literals;
using collcomm_test::net::netns_hosts;
using collcomm_test::net::placement;
using collcomm_test::net::rank_context;
using collcomm_test::net::rank_layout;
using collcomm_test::net::rank_result;
using collcomm_test::net::rank_status;
using collcomm_test::net::require;
using collcomm_test::net::running;
using net_comm = collcomm::communicator<collcomm::transport::net<collcomm::transport::socket>>;
namespace sk = collcomm::transport::sockets;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string ipv4_text(std::uint32_t ip_net_order) {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr a{ip_net_order};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

// One TCP socket of this process: its descriptor, whether it listens, its two ends.
struct tcp_socket {
  int fd;
  bool listening;
  sockaddr_in local, peer;  // peer: zero when not connected
};

// This process's IPv4 TCP sockets (by /proc/self/fd).
std::vector<tcp_socket> tcp_sockets() {
  std::vector<tcp_socket> v;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return v;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    int domain = 0, type = 0, acc = 0;
    socklen_t len = sizeof domain;
    if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_INET) continue;
    len = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    len = sizeof acc;
    ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len);
    tcp_socket s{fd, acc != 0, {}, {}};
    len = sizeof s.local;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&s.local), &len);
    len = sizeof s.peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&s.peer), &len) != 0) s.peer = {};
    v.push_back(s);
  }
  ::closedir(d);
  return v;
}

// The listening socket that appeared between `before` and now (the communicator's listener).
tcp_socket new_listener(const std::vector<tcp_socket>& before, int rank) {
  std::vector<tcp_socket> found;
  for (const auto& s : tcp_sockets()) {
    if (!s.listening) continue;
    const bool old = std::any_of(before.begin(), before.end(), [&](const tcp_socket& b) {
      return b.listening && b.local.sin_port == s.local.sin_port && b.local.sin_addr.s_addr == s.local.sin_addr.s_addr;
    });
    if (!old) found.push_back(s);
  }
  require(found.size() == 1, "rank " + std::to_string(rank) + ": the communicator made " + std::to_string(found.size()) +
                                 " listening sockets, want 1");
  return found[0];
}

// SIGPIPE in a rank: counted rather than fatal, so that a write to a dead connection that raises it
// (where MSG_NOSIGNAL is missing) shows as a failed check instead of a rank killed by the signal.
volatile std::sig_atomic_t sigpipes = 0;
void on_sigpipe(int) { sigpipes = sigpipes + 1; }

// A rank's fn that counts SIGPIPE while `f` runs (the communicator's destructor included) and
// notes "SIGPIPE x N" when there was any.
template <class F>
collcomm_test::net::netns_hosts::rank_fn counting_sigpipe(F f) {
  return [f](rank_context& ctx) {
    struct sigaction sa {};
    sa.sa_handler = on_sigpipe;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGPIPE, &sa, nullptr);
    f(ctx);
    if (sigpipes != 0) ctx.notify("SIGPIPE x " + std::to_string(int(sigpipes)));
  };
}

// Checks that no rank noted SIGPIPE.
void check_no_sigpipe(const collcomm_test::net::run_result& res) {
  for (const auto& r : res.ranks)
    for (const auto& note : r.notes)
      CHECK_MESSAGE(note.rfind("SIGPIPE", 0) != 0,
                    "rank " << r.rank << " got " << note
                            << " (a write to a closed or failed connection without MSG_NOSIGNAL: it kills a process "
                               "that does not ignore SIGPIPE)");
}

// The ranks named in a text ("rank 3", "rank 12"), by regex.
std::set<int> ranks_named(const std::string& text) {
  static const std::regex re("rank ([0-9]+)");
  std::set<int> s;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    s.insert(std::stoi((*it)[1].str()));
  return s;
}

// ---- the correctness matrix ---------------------------------------------------------------------

struct matrix_options {
  int channels;
  std::size_t slot_bytes;
  int slots;
  int streams;
  bool derived_host_id;  // opt.host_id left 0: the communicator derives it (from the namespace)
  // Elements float and int32 with sum, max and avg, and moving float and int8; else (every kind
  // and algorithm still) float and int32 with sum, and moving int8.
  bool full;
};

// What each rank publishes to the others after the communicator is made.
struct published_listener {
  std::uint32_t ipv4;  // network order
  std::uint16_t port;  // network order
  std::uint16_t host;
};

void run_matrix_on(const rank_layout& layout, const matrix_options mo) {
  const std::uint64_t seed = collcomm_test::mp::matrix_seed();  // before the fork: one seed for all ranks
  netns_hosts hosts(static_cast<int>(layout.per_host.size()));
  const auto host_of = layout.host_of();
  const auto res = hosts.run_ranks(
      layout,
      counting_sigpipe([&](rank_context& ctx) {
        auto boot = ctx.bootstrap(20s);
        const auto before = tcp_sockets();
        collcomm::host::net_options opt;
        opt.channels = mo.channels;
        opt.slot_bytes = mo.slot_bytes;
        opt.slots = mo.slots;
        opt.socket.streams = mo.streams;
        opt.timeout = 20s;
        opt.host_id = mo.derived_host_id ? 0 : 0x5100 + 2 * static_cast<std::uint64_t>(ctx.host) + 1;
        net_comm comm(boot, opt);
        require(comm.rank() == ctx.rank && comm.size() == ctx.nranks, "rank/size mismatch");

        // Host ids: equal exactly for ranks of one namespace.
        const auto& ids = comm.host_ids();
        require(static_cast<int>(ids.size()) == ctx.nranks, "host_ids() has the wrong size");
        for (int a = 0; a < ctx.nranks; ++a)
          for (int b = 0; b < ctx.nranks; ++b) {
            const bool same_host = host_of[std::size_t(a)] == host_of[std::size_t(b)];
            const bool same_id = ids[std::size_t(a)] == ids[std::size_t(b)];
            require(same_host == same_id, "host_ids(): ranks " + std::to_string(a) + " and " + std::to_string(b) +
                                              (same_host ? " share a namespace but have other ids"
                                                         : " are on other hosts but have one id"));
          }

        // The listener: on this host's address; every rank's, gathered over the bootstrap.
        const tcp_socket lis = new_listener(before, ctx.rank);
        require(ipv4_text(lis.local.sin_addr.s_addr) == ctx.address,
                "rank " + std::to_string(ctx.rank) + " listens on " + ipv4_text(lis.local.sin_addr.s_addr) +
                    ", not on its host's address " + ctx.address);
        published_listener mine{lis.local.sin_addr.s_addr, lis.local.sin_port, static_cast<std::uint16_t>(ctx.host)};
        std::vector<published_listener> all(std::size_t(ctx.nranks));
        boot.all_gather(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(all)));

        namespace mp = collcomm_test::mp;
        using collcomm_test::type_list;
        mp::rank_report rep{};
        long calls = 0, compositions = 0;
        const std::uint64_t s = seed + static_cast<std::uint64_t>(ctx.nranks);
        const int bad_reduce =
            mo.full ? mp::run_matrix<mp::pick_reducing, type_list<float, std::int32_t>,
                                     type_list<collcomm::op::sum, collcomm::op::max, collcomm::op::avg>>(
                          comm, s, mo.slot_bytes, rep, calls, compositions)
                    : mp::run_matrix<mp::pick_reducing, type_list<float, std::int32_t>, type_list<collcomm::op::sum>>(
                          comm, s, mo.slot_bytes, rep, calls, compositions);
        require(bad_reduce == 0, std::string("reducing kinds: ") + rep.msg);
        const int bad_move =
            mo.full ? mp::run_matrix<mp::pick_moving, type_list<float, std::int8_t>, type_list<>>(
                          comm, s + 1, mo.slot_bytes, rep, calls, compositions)
                    : mp::run_matrix<mp::pick_moving, type_list<std::int8_t>, type_list<>>(comm, s + 1, mo.slot_bytes,
                                                                                          rep, calls, compositions);
        require(bad_move == 0, std::string("moving kinds: ") + rep.msg);
        // An all_to_all (pairwise): every pair of ranks exchanges, so every rank has connections to
        // every other, across the hosts too.
        {
          std::vector<std::int32_t> a2a(std::size_t(ctx.nranks) * 64), back(a2a.size(), -1);
          for (std::size_t k = 0; k < a2a.size(); ++k) a2a[k] = static_cast<std::int32_t>(ctx.rank * 100000 + int(k));
          collcomm::all_to_all<collcomm::algo::pairwise>(comm, a2a.data(), back.data(), 64);
          for (int r = 0; r < ctx.nranks; ++r)
            for (int k = 0; k < 64; ++k)
              require(back[std::size_t(r) * 64 + std::size_t(k)] == r * 100000 + ctx.rank * 64 + k,
                      "all_to_all: a wrong element from rank " + std::to_string(r));
        }

        // The communicator's connections (accepted on its listener, or made to a peer's listener):
        // from this host's address, to the peers' host addresses. Noted as "sockets <same> <cross>
        // <which>" for the parent, which wants some across the hosts.
        int same = 0, cross = 0;
        std::map<std::string, int> which;
        for (const auto& t : tcp_sockets()) {
          if (t.listening || t.peer.sin_family != AF_INET) continue;
          const bool accepted = t.local.sin_port == lis.local.sin_port;
          int peer_host = -1, peer_rank = -1;
          for (int r = 0; r < ctx.nranks; ++r) {
            const auto& p = all[std::size_t(r)];
            if (p.ipv4 == t.peer.sin_addr.s_addr && (accepted || p.port == t.peer.sin_port)) {
              peer_host = p.host;
              if (!accepted) peer_rank = r;
            }
          }
          if (!accepted && peer_host < 0) continue;  // the bootstrap's
          require(peer_host >= 0, "rank " + std::to_string(ctx.rank) + ": a connection of the communicator from " +
                                      ipv4_text(t.peer.sin_addr.s_addr) + ", no rank's address");
          require(ipv4_text(t.local.sin_addr.s_addr) == ctx.address,
                  "rank " + std::to_string(ctx.rank) + ": a connection from " + ipv4_text(t.local.sin_addr.s_addr));
          require(ipv4_text(t.peer.sin_addr.s_addr) == hosts.address(peer_host), "a peer address that is not its host's");
          (peer_host == ctx.host ? same : cross)++;
          ++which[accepted ? "from-host-" + std::to_string(peer_host) : "to-rank-" + std::to_string(peer_rank)];
        }
        std::string w;
        for (const auto& [k, v] : which) w += " " + k + "x" + std::to_string(v);
        if (cross == 0) {  // every TCP socket of this process, for the parent's warning
          w += " | all sockets:";
          for (const auto& t : tcp_sockets())
            w += " " + ipv4_text(t.local.sin_addr.s_addr) + ":" + std::to_string(ntohs(t.local.sin_port)) +
                 (t.listening ? "(listening)" : "->" + ipv4_text(t.peer.sin_addr.s_addr) + ":" + std::to_string(ntohs(t.peer.sin_port)));
        }
        ctx.notify("sockets " + std::to_string(same) + " " + std::to_string(cross) + w);
        ctx.output = std::to_string(compositions) + " compositions, " + std::to_string(calls) + " calls, listener " +
                     ctx.address + ":" + std::to_string(ntohs(lis.local.sin_port));
      }),
      200s);
  INFO(res.summary());
  CHECK(res.ok());
  CHECK(res.unfinished.empty());
  check_no_sigpipe(res);
  int cross_total = 0;
  std::string conns;
  for (const auto& r : res.ranks)
    for (const auto& note : r.notes)
      if (note.rfind("sockets ", 0) == 0) {
        std::istringstream in(note.substr(8));
        int same = 0, cross = 0;
        in >> same >> cross;
        CHECK_MESSAGE(same + cross > 0, "rank " << r.rank << " has no connection");
        WARN_MESSAGE(cross > 0, "rank " << r.rank << " sees no socket of the communicator to another host after an "
                                           "all_to_all: " << note);
        cross_total += cross;
        conns += " rank " + std::to_string(r.rank) + ":" + note.substr(8) + ";";
      }
  if (res.ok()) CHECK_MESSAGE(cross_total > 0, "no connection between the hosts:" << conns);
  std::string per_host;
  for (int h = 0; h < int(layout.per_host.size()); ++h) per_host += (h ? " x " : "") + std::to_string(layout.per_host[std::size_t(h)]);
  MESSAGE("hosts " << per_host << std::string(layout.order == placement::round_robin ? " (round robin)" : "")
                   << ", channels " << mo.channels << ", slot_bytes " << mo.slot_bytes << ", slots " << mo.slots
                   << ", streams " << mo.streams << std::string(mo.derived_host_id ? ", derived host ids" : "")
                   << std::string(mo.full ? "" : ", fewer element types and ops") << ": " << res.elapsed.count()
                   << " ms; rank 0: " << (res.ranks.empty() ? "" : res.ranks[0].output) << "; seed " << seed
                   << "; sockets (within, across, to rank or from host x count):" << conns);
}

// ---- failures ------------------------------------------------------------------------------------

// How a rank's loop of calls ended: its collcomm::error (code, steady_clock time, text).
struct ended {
  collcomm::errc code;
  std::int64_t ns;
  std::string text;
};

// In a rank: runs body(i) for i = 0, 1, ... until it throws collcomm::error, which is kept in
// ctx.output as "<errc>|<ns>|<text>"; throws (a test failure) when `limit` passes without one.
// After the error it waits `linger` (the communicator still alive, as in a program that reports
// the error before it tears the communicator down).
template <class F>
void until_error(rank_context& ctx, std::chrono::milliseconds limit, std::chrono::milliseconds linger, F&& body) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (long i = 0;; ++i) {
    try {
      body(i);
    } catch (const collcomm::error& e) {
      ctx.output = std::to_string(static_cast<int>(e.code())) + "|" + std::to_string(now_ns()) + "|" + e.what();
      std::this_thread::sleep_for(linger);
      return;
    }
    require(std::chrono::steady_clock::now() < deadline,
            "rank " + std::to_string(ctx.rank) + ": no error within " + std::to_string(limit.count()) + " ms (" +
                std::to_string(i + 1) + " iterations)");
  }
}

std::optional<ended> parse_ended(const rank_result& r) {
  if (r.status != rank_status::ok) return std::nullopt;
  const auto a = r.output.find('|');
  const auto b = a == std::string::npos ? a : r.output.find('|', a + 1);
  if (b == std::string::npos) return std::nullopt;
  return ended{static_cast<collcomm::errc>(std::stoi(r.output.substr(0, a))), std::stoll(r.output.substr(a + 1, b - a - 1)),
               r.output.substr(b + 1)};
}

// An all_reduce of `count` floats of value rank + 1, checked on its first call.
struct reduce_loop {
  net_comm& comm;
  std::size_t count;
  std::vector<float> in, out;
  reduce_loop(net_comm& c, std::size_t n)
      : comm(c), count(n), in(n, static_cast<float>(c.rank() + 1)), out(n, -1.0f) {}
  void call(long i) {
    collcomm::all_reduce(comm, in.data(), out.data(), count, collcomm::op::sum{});
    if (i == 0) {
      const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
      for (std::size_t k = 0; k < count; k += 997)
        require(out[k] == want, "rank " + std::to_string(comm.rank()) + ": all_reduce gave " + std::to_string(out[k]) +
                                    " at " + std::to_string(k) + ", want " + std::to_string(want));
    }
  }
};

collcomm::host::net_options fault_options(std::chrono::milliseconds timeout) {
  collcomm::host::net_options opt;
  opt.timeout = timeout;
  opt.socket.streams = 2;
  opt.slot_bytes = std::size_t{256} << 10;
  return opt;
}

// Checks each listed rank ended with an error within `bound` after `event_ns`, naming one of
// `must_name` (when not empty); records every text.
void check_endings(const collcomm_test::net::run_result& res, const std::vector<int>& which, std::int64_t event_ns,
                   std::chrono::milliseconds bound, const std::set<int>& must_name,
                   const std::set<collcomm::errc>& codes) {
  CHECK(res.unfinished.empty());
  for (int r : which) {
    const rank_result& rr = res.ranks[std::size_t(r)];
    INFO(rr.describe());
    CHECK(rr.status != rank_status::timed_out);
    const auto e = parse_ended(rr);
    REQUIRE_MESSAGE(e, "rank " << r << " did not end with a collcomm::error");
    const double after_ms = double(e->ns - event_ns) / 1e6;
    MESSAGE("rank " << r << " (host " << rr.host << "), " << after_ms << " ms after: " << collcomm::to_string(e->code)
                    << ": " << e->text);
    CHECK(codes.count(e->code) == 1);
    CHECK(after_ms < double(bound.count()));
    if (!must_name.empty()) {
      const auto named = ranks_named(e->text);
      bool ok = false;
      for (int n : named) ok = ok || must_name.count(n);
      CHECK_MESSAGE(ok, "rank " << r << "'s error names none of the ranks it should");
    }
  }
}

}  // namespace

TEST_CASE("net<socket> across namespaces: every kind x every FIFO algorithm, 2 hosts x 2 ranks") {
  run_matrix_on({2, 2}, {2, 256, 2, 3, false, true});
}
TEST_CASE("net<socket> across namespaces: every kind x every FIFO algorithm, 3 hosts x 1 rank") {
  run_matrix_on({1, 1, 1}, {1, 1024, 1, 1, false, false});
}
TEST_CASE("net<socket> across namespaces: every kind x every FIFO algorithm, 2 hosts x 3 ranks") {
  run_matrix_on({3, 3}, {2, 4096, 4, 2, false, false});
}
TEST_CASE("net<socket> across namespaces: every kind x every FIFO algorithm, 2 hosts x 3 ranks round robin") {
  run_matrix_on(rank_layout({3, 3}, placement::round_robin), {1, 1024, 3, 2, true, false});
}

TEST_CASE("net<socket> across namespaces: a link cut in the middle of a call") {
  constexpr auto timeout = 3000ms;
  netns_hosts hosts(2);
  const rank_layout layout{2, 2};
  std::int64_t cut_ns = 0;
  const auto res = hosts.run_ranks(
      layout,
      counting_sigpipe([&](rank_context& ctx) {
        auto boot = ctx.bootstrap(5s);
        net_comm comm(boot, fault_options(timeout));
        reduce_loop loop(comm, std::size_t{2} << 20);  // 8 MiB of floats
        until_error(ctx, 40s, timeout, [&](long i) {
          loop.call(i);
          if (i == 0) ctx.notify("running");
        });
      }),
      90s,
      [&](running& run) {
        for (int r = 0; r < run.nranks(); ++r) run.expect_note(r, "running", 60s);
        std::this_thread::sleep_for(100ms);  // all in the middle of a call
        hosts.link_down(1);
        cut_ns = now_ns();
      });
  INFO(res.summary());
  REQUIRE(res.ranks.size() == 4);
  check_no_sigpipe(res);
  // Host 0 has ranks 0, 1; host 1 ranks 2, 3: each must name one across the cut.
  check_endings(res, {0, 1}, cut_ns, 3 * timeout, {2, 3}, {collcomm::errc::timeout, collcomm::errc::system, collcomm::errc::aborted});
  check_endings(res, {2, 3}, cut_ns, 3 * timeout, {0, 1}, {collcomm::errc::timeout, collcomm::errc::system, collcomm::errc::aborted});
}

TEST_CASE("net<socket> across namespaces: a rank killed in the middle of a loop of calls") {
  constexpr auto timeout = 3000ms;
  struct kill_case {
    rank_layout layout;
    int victim;
  };
  for (const kill_case& kc : {kill_case{{2, 2}, 2}, kill_case{{1, 1, 1}, 1}}) {
    CAPTURE(kc.victim);
    netns_hosts hosts(static_cast<int>(kc.layout.per_host.size()));
    std::int64_t kill_ns = 0;
    const auto res = hosts.run_ranks(
        kc.layout,
        counting_sigpipe([&](rank_context& ctx) {
          auto boot = ctx.bootstrap(5s);
          net_comm comm(boot, fault_options(timeout));
          reduce_loop loop(comm, std::size_t{1} << 18);
          until_error(ctx, 40s, timeout, [&](long i) {
            loop.call(i);
            if (i == 0) ctx.notify("running");
          });
        }),
        90s,
        [&](running& run) {
          for (int r = 0; r < run.nranks(); ++r) run.expect_note(r, "running", 60s);
          std::this_thread::sleep_for(100ms);
          run.kill_rank(kc.victim);
          kill_ns = now_ns();
        });
    INFO(res.summary());
    const int n = kc.layout.nranks();
    REQUIRE(static_cast<int>(res.ranks.size()) == n);
    check_no_sigpipe(res);
    CHECK(res.ranks[std::size_t(kc.victim)].status == rank_status::signaled);
    std::vector<int> survivors;
    for (int r = 0; r < n; ++r)
      if (r != kc.victim) survivors.push_back(r);
    MESSAGE("layout of " << n << " ranks, rank " << kc.victim << " killed:");
    check_endings(res, survivors, kill_ns, 3 * timeout, {kc.victim},
                  {collcomm::errc::system, collcomm::errc::aborted, collcomm::errc::timeout});
  }
}

TEST_CASE("net<socket> across namespaces: a rank that disagrees") {
  constexpr auto timeout = 5000ms;
  enum how { other_root, other_count };
  for (how h : {other_root, other_count}) {
    CAPTURE(int(h));
    netns_hosts hosts(2);
    const auto res = hosts.run_ranks(
        {2, 2},
        counting_sigpipe([&](rank_context& ctx) {
          auto boot = ctx.bootstrap(5s);
          net_comm comm(boot, fault_options(timeout));
          const std::size_t count = 100000;
          std::vector<float> in(count + 1, 1.0f), out(count + 1, 0.0f);
          const bool odd = ctx.rank == 3;
          until_error(ctx, 30s, 0ms, [&](long i) {
            if (i == 2) {
              ctx.notify("disagree " + std::to_string(now_ns()));
              if (h == other_root)
                collcomm::broadcast(comm, in.data(), out.data(), count, odd ? 1 : 0);
              else
                collcomm::all_reduce(comm, in.data(), out.data(), odd ? count + 1 : count, collcomm::op::sum{});
            } else {
              collcomm::all_reduce(comm, in.data(), out.data(), count, collcomm::op::sum{});
            }
            require(i < 20, "rank " + std::to_string(ctx.rank) + ": 20 calls after the disagreement, and no error");
          });
        }),
        90s);
    INFO(res.summary());
    REQUIRE(res.ranks.size() == 4);
    check_no_sigpipe(res);
    std::int64_t start = std::numeric_limits<std::int64_t>::max();
    for (const auto& r : res.ranks)
      for (const auto& note : r.notes)
        if (note.rfind("disagree ", 0) == 0) start = std::min<std::int64_t>(start, std::stoll(note.substr(9)));
    REQUIRE(start != std::numeric_limits<std::int64_t>::max());
    MESSAGE(std::string(h == other_root ? "rank 3 broadcasts from root 1, the others from root 0:"
                             : "rank 3 all_reduces one element more:"));
    check_endings(res, {0, 1, 2, 3}, start, 3 * timeout, {},
                  {collcomm::errc::invalid_argument, collcomm::errc::aborted, collcomm::errc::system});
    int detected = 0;
    for (const auto& r : res.ranks)
      if (auto e = parse_ended(r); e && e->code == collcomm::errc::invalid_argument) ++detected;
    CHECK(detected >= 1);
  }
}

namespace {

// ---- bogus connections ---------------------------------------------------------------------------

struct listener_of {
  int rank;
  std::string address;
  std::uint16_t port;
};

// A nonblocking connection to addr:port within `limit`; -1 when it fails.
int connect_to(const std::string& addr, std::uint16_t port, std::chrono::milliseconds limit) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINPROGRESS) {
      ::close(fd);
      return -1;
    }
    pollfd pf{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (::poll(&pf, 1, static_cast<int>(limit.count())) != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
        err != 0) {
      ::close(fd);
      return -1;
    }
  }
  return fd;
}

std::string random_bytes(std::size_t n, std::mt19937_64& g) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(g());
  return s;
}

// A hello for rank `dst`'s listener with the job's id, random nonces and a random MAC.
std::string forged_hello(std::uint64_t job, int dst, std::uint32_t stream, std::mt19937_64& g) {
  sk::detail::hello h{};
  h.magic = sk::detail::hello_magic;
  h.job = job;
  for (auto& b : h.server_nonce) b = static_cast<std::byte>(g());
  for (auto& b : h.client_nonce) b = static_cast<std::byte>(g());
  h.src = dst > 0 ? static_cast<std::uint32_t>(dst - 1) : 1u;
  h.dst = static_cast<std::uint32_t>(dst);
  h.channel = 0;
  h.stream = stream;
  h.mac = g();
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

// The attacker, in a namespace of its own host: opens bogus connections to every listener, says
// "sent" on `out`, waits (bounded) until the ranks dropped every one, then connects, writes
// garbage and hangs up in a loop for `churn`; writes its report ("ok ..." or "FAIL ...") and exits.
[[noreturn]] void attacker(int out, const std::vector<listener_of>& listeners, std::uint64_t job,
                           std::chrono::milliseconds churn) {
  std::string report;
  bool failed = false;
  try {
    std::mt19937_64 g(now_ns());
    struct probe {
      int fd;
      std::string what;
      int rank;
      std::int64_t closed_ns = 0;
      std::size_t answered = 0;
    };
    std::vector<probe> probes;
    auto open = [&](const listener_of& l, const std::string& what, const std::string& bytes) {
      const int fd = connect_to(l.address, l.port, 3s);
      if (fd < 0) throw std::runtime_error("cannot connect to rank " + std::to_string(l.rank) + "'s listener");
      if (!bytes.empty() && !collcomm_test::net::detail::send_all(fd, bytes.data(), bytes.size()))
        throw std::runtime_error("cannot send " + what + " to rank " + std::to_string(l.rank));
      probes.push_back({fd, what, l.rank});
    };
    for (const auto& l : listeners) {
      for (int k = 0; k < 6; ++k) open(l, "idle", "");
      open(l, "72 bytes of garbage", random_bytes(72, g));
      open(l, "64 KiB of garbage", random_bytes(64 << 10, g));
      open(l, "a hello with a wrong MAC", forged_hello(job, l.rank, 0, g));
      open(l, "a connection request with a wrong MAC", forged_hello(job, l.rank, sk::socket_endpoint::request_stream, g));
      open(l, "half a hello", forged_hello(job, l.rank, 0, g).substr(0, 40));
    }
    const std::int64_t sent_ns = now_ns();
    if (!collcomm_test::net::detail::send_all(out, "sent\n", 5)) ::_exit(3);
    // Every bogus connection must be closed by its rank without a byte of answer.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    std::size_t open_left = probes.size();
    while (open_left > 0 && std::chrono::steady_clock::now() < deadline) {
      std::vector<pollfd> pf;
      for (const auto& p : probes)
        if (p.closed_ns == 0) pf.push_back({p.fd, POLLIN, 0});
      ::poll(pf.data(), pf.size(), 50);
      for (auto& p : probes) {
        if (p.closed_ns != 0) continue;
        char buf[256];
        const ssize_t k = ::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k > 0) p.answered += static_cast<std::size_t>(k);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          p.closed_ns = now_ns();
          --open_left;
        }
      }
    }
    std::map<std::string, std::pair<int, double>> closed;  // what: (count, slowest ms after "sent")
    for (const auto& p : probes) {
      if (p.answered > 0) {
        failed = true;
        report += "rank " + std::to_string(p.rank) + " answered " + std::to_string(p.answered) + " bytes to " + p.what + "; ";
      }
      if (p.closed_ns == 0) {
        failed = true;
        report += "rank " + std::to_string(p.rank) + " kept " + p.what + " open for 30 s; ";
      } else {
        auto& c = closed[p.what];
        ++c.first;
        c.second = std::max(c.second, double(p.closed_ns - sent_ns) / 1e6);
      }
      ::close(p.fd);
    }
    for (const auto& [what, c] : closed)
      report += std::to_string(c.first) + " x " + what + ": dropped (the last " + std::to_string(int(c.second)) +
                " ms after they were sent); ";
    // Churn while the job runs: connect, garbage or a forged hello, hang up.
    int churned = 0;
    const auto churn_end = std::chrono::steady_clock::now() + churn;
    while (std::chrono::steady_clock::now() < churn_end && churned < 100000) {
      const auto& l = listeners[std::size_t(churned) % listeners.size()];
      const int fd = connect_to(l.address, l.port, 3s);
      if (fd < 0) {
        failed = true;
        report += "rank " + std::to_string(l.rank) + "'s listener refused a connection during the churn; ";
        break;
      }
      const std::string bytes = churned % 2 ? random_bytes(1 + g() % 200, g) : forged_hello(job, l.rank, 0, g);
      collcomm_test::net::detail::send_all(fd, bytes.data(), bytes.size());
      ::close(fd);
      ++churned;
      std::this_thread::sleep_for(2ms);
    }
    report += std::to_string(churned) + " connections opened, written to and closed during the calls";
  } catch (const std::exception& e) {
    failed = true;
    report += e.what();
  }
  report = (failed ? "FAIL " : "ok ") + report;
  collcomm_test::net::detail::send_all(out, report.data(), report.size());
  ::close(out);
  ::_exit(0);
}

}  // namespace

TEST_CASE("net<socket> across namespaces: bogus connections from another host are dropped") {
  netns_hosts hosts(2);
  const rank_layout layout{2, 2};
  std::string attack_report, parent_failure;
  const auto res = hosts.run_ranks(
      layout,
      counting_sigpipe([&](rank_context& ctx) {
        auto boot = ctx.bootstrap(20s);
        const auto before = tcp_sockets();
        collcomm::host::net_options opt;
        opt.channels = 2;
        opt.socket.streams = 2;
        opt.slot_bytes = 4096;
        opt.slots = 2;
        opt.timeout = 8s;  // handshakes in progress are dropped after 2 s
        net_comm comm(boot, opt);
        const tcp_socket lis = new_listener(before, ctx.rank);
        ctx.notify("listener " + ipv4_text(lis.local.sin_addr.s_addr) + " " + std::to_string(ntohs(lis.local.sin_port)) +
                   " " + std::to_string(collcomm::bootstrap::auth::job_id(ctx.token)));
        ctx.expect_message("go", 60s);
        const int n = ctx.nranks;
        const std::size_t count = 4096, gcount = 1000;
        std::vector<float> in(count), out(count);
        std::vector<std::int32_t> gin(gcount), gout(gcount * std::size_t(n));
        const auto deadline = std::chrono::steady_clock::now() + 90s;
        long i = 0;
        for (;; ++i) {
          std::fill(in.begin(), in.end(), static_cast<float>(ctx.rank + 1 + i % 7));
          collcomm::all_reduce(comm, in.data(), out.data(), count, collcomm::op::sum{});
          const float want = static_cast<float>(n * (n + 1) / 2 + n * (i % 7));
          for (std::size_t k = 0; k < count; ++k)
            require(out[k] == want, "all_reduce " + std::to_string(i) + ": element " + std::to_string(k) + " is " +
                                        std::to_string(out[k]) + ", want " + std::to_string(want));
          for (std::size_t k = 0; k < gcount; ++k) gin[k] = static_cast<std::int32_t>(ctx.rank * 100000 + k + i);
          collcomm::all_gather(comm, gin.data(), gout.data(), gcount);
          for (int r = 0; r < n; ++r)
            for (std::size_t k = 0; k < gcount; ++k)
              require(gout[std::size_t(r) * gcount + k] == static_cast<std::int32_t>(r * 100000 + k + i),
                      "all_gather " + std::to_string(i) + ": rank " + std::to_string(r) + "'s element " +
                          std::to_string(k) + " is wrong");
          // Stop together: once any rank got "stop" (or its time ran out).
          const auto m = ctx.wait_message(0ms);
          std::int32_t stop = (m && *m == "stop") || std::chrono::steady_clock::now() >= deadline ? 1 : 0, any = 0;
          collcomm::all_reduce(comm, &stop, &any, 1, collcomm::op::max{});
          if (any != 0) break;
        }
        require(std::chrono::steady_clock::now() < deadline, "no 'stop' from the parent within 90 s");
        ctx.output = std::to_string(i + 1) + " iterations";
      }),
      150s,
      [&](running& run) {
        std::vector<listener_of> listeners;
        std::uint64_t job = 0;
        for (int r = 0; r < run.nranks(); ++r) {
          const auto note = run.wait_note(r, 60s);
          std::istringstream in(note.value_or(""));
          std::string word, addr;
          unsigned port = 0;
          in >> word >> addr >> port >> job;
          if (word != "listener" || port == 0) {
            parent_failure = "rank " + std::to_string(r) + " noted '" + note.value_or("nothing") + "'";
            run.send_all("stop");
            return;
          }
          listeners.push_back({r, addr, static_cast<std::uint16_t>(port)});
        }
        int p[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) == 0);
        std::fflush(stdout);
        std::fflush(stderr);
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
          ::close(p[0]);
          ::prctl(PR_SET_PDEATHSIG, SIGKILL);
          try {
            netns_hosts::enter_ns(hosts.ns_name(1));
          } catch (...) {
            ::_exit(2);
          }
          attacker(p[1], listeners, job, 3s);
        }
        ::close(p[1]);
        collcomm_test::net::detail::set_nonblocking(p[0]);
        // "sent", then the report until the attacker closes the pipe (bounded).
        std::string got;
        bool go_sent = false;
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (std::chrono::steady_clock::now() < deadline) {
          pollfd pf{p[0], POLLIN, 0};
          ::poll(&pf, 1, 50);
          if (!collcomm_test::net::detail::read_some(p[0], got)) break;
          if (!go_sent && got.rfind("sent\n", 0) == 0) {
            got.erase(0, 5);
            run.send_all("go");
            go_sent = true;
          }
        }
        ::close(p[0]);
        ::kill(pid, SIGKILL);  // gone already, unless it overran
        int st = 0;
        ::waitpid(pid, &st, 0);
        if (!go_sent) {
          parent_failure = "the attacker never said it sent its connections";
          run.send_all("go");
        }
        attack_report = got;
        run.send_all("stop");
      });
  INFO(res.summary());
  INFO(parent_failure);
  CHECK(parent_failure.empty());
  CHECK(res.ok());
  check_no_sigpipe(res);
  MESSAGE("attacker on host 1: " << attack_report);
  CHECK(attack_report.rfind("ok ", 0) == 0);
  for (const auto& r : res.ranks) MESSAGE("rank " << r.rank << ": " << r.output);
}

TEST_CASE("no namespace of this process is left") {
  // Runs last (doctest orders by file and line).
  std::string left;
  for (const auto& n : netns_hosts::list_ours())
    if (n.rfind(netns_hosts::own_prefix(), 0) == 0) left += n + " ";
  CHECK_MESSAGE(left.empty(), "left: " << left);
}
