// tests/net/test_netns.cpp — the namespace harness (netns.hpp) itself: ranks on several hosts
// bootstrap over collcomm's tcp bootstrap and see their own namespaces; links cut and restored
// change what a rank reaches; dead, failing and hung ranks are reported as such; the skip path;
// MTU; no namespace is left behind, and those of dead runs are cleaned up.
#include "net/netns.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <array>
#include <cstring>
#include <set>

COLLCOMM_NET_SKIP_WITHOUT_NETNS();

namespace {

using namespace collcomm_test::net;
using namespace std::chrono_literals;

// One connection attempt to addr:port within `limit`: 0 when connected, else the errno
// (ETIMEDOUT when the time ran out).
int try_connect(const std::string& addr, std::uint16_t port, std::chrono::milliseconds limit) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
  int err = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd pf{fd, POLLOUT, 0};
      const int rc = ::poll(&pf, 1, static_cast<int>(limit.count()));
      if (rc == 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
  }
  ::close(fd);
  return err;
}

// Connects until it works or `limit` passes; 0 or the last errno.
int connect_within(const std::string& addr, std::uint16_t port, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int err = 0;
  do {
    err = try_connect(addr, port, 300ms);
    if (err == 0) return 0;
    std::this_thread::sleep_for(20ms);
  } while (std::chrono::steady_clock::now() < deadline);
  return err;
}

// A listening socket on addr:port (in the caller's namespace).
int listen_at(const std::string& addr, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  require(fd >= 0, "socket failed");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
  require(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0,
          "bind " + addr + ":" + std::to_string(port) + ": " + std::strerror(errno));
  require(::listen(fd, 64) == 0, std::string("listen: ") + std::strerror(errno));
  return fd;
}

// This process's open descriptors.
int count_fds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n - 1;  // the directory's own descriptor
}

// What each rank tells the others in the all_gather.
struct rank_info {
  std::int32_t rank, host;
  std::uint64_t inode;
};

// Bootstraps, all_gathers (rank, host, namespace inode) and checks that ranks of one host share a
// namespace, ranks of other hosts do not, and none is in the parent's.
void bootstrap_and_compare(const rank_layout& layout) {
  const std::uint64_t parent_inode = net_ns_inode();
  netns_hosts hosts(static_cast<int>(layout.per_host.size()));
  const int fds_before = count_fds();
  const auto res = hosts.run_ranks(
      layout,
      [&](rank_context& ctx) {
        auto boot = ctx.bootstrap(20s);
        rank_info mine{ctx.rank, ctx.host, net_ns_inode()};
        require(mine.inode != 0, "cannot read /proc/self/ns/net");
        std::vector<rank_info> all(std::size_t(ctx.nranks));
        boot.all_gather(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(all)));
        for (const auto& a : all) {
          for (const auto& b : all) {
            const bool same_host = a.host == b.host, same_ns = a.inode == b.inode;
            require(same_host == same_ns, "ranks " + std::to_string(a.rank) + " (host " + std::to_string(a.host) +
                                              ") and " + std::to_string(b.rank) + " (host " + std::to_string(b.host) +
                                              ") " + (same_ns ? "share" : "do not share") + " a namespace");
          }
          require(a.inode != parent_inode, "rank " + std::to_string(a.rank) + " is in the parent's namespace");
        }
        boot.barrier();
        ctx.output = std::to_string(ctx.host) + " " + std::to_string(mine.inode);
      },
      60s);
  INFO(res.summary());
  REQUIRE(res.ok());
  CHECK(count_fds() == fds_before);
  const auto host_of = layout.host_of();
  std::set<std::string> inodes;
  for (const auto& r : res.ranks) {
    CHECK(r.host == host_of[std::size_t(r.rank)]);
    CHECK(r.output.substr(0, r.output.find(' ')) == std::to_string(r.host));
    inodes.insert(r.output.substr(r.output.find(' ') + 1));
  }
  std::size_t used = 0;
  for (int k : layout.per_host) used += k > 0;
  CHECK(inodes.size() == used);
  MESSAGE(res.ranks.size() << " ranks on " << layout.per_host.size() << " hosts bootstrapped in " << res.elapsed.count()
                           << " ms");
}

}  // namespace

TEST_CASE("the skip path: COLLCOMM_TEST_NO_NETNS=1 makes unavailable() say why and a test exit 77") {
  REQUIRE(!netns_hosts::unavailable());  // this process got here, so namespaces work
  ::setenv("COLLCOMM_TEST_NO_NETNS", "1", 1);
  const auto why = netns_hosts::unavailable();
  ::unsetenv("COLLCOMM_TEST_NO_NETNS");
  REQUIRE(why);
  CHECK(why->find("COLLCOMM_TEST_NO_NETNS") != std::string::npos);
  CHECK(!netns_hosts::unavailable());

  // skip_without_netns() in a child with the variable set: the line on stdout, exit code 77.
  int p[2];
  REQUIRE(::pipe(p) == 0);
  std::fflush(stdout);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::setenv("COLLCOMM_TEST_NO_NETNS", "1", 1);
    skip_without_netns();
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buf[256];
  ssize_t k;
  while ((k = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, std::size_t(k));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 77);
  CHECK(out == "skipped: network namespaces unavailable: COLLCOMM_TEST_NO_NETNS=1 is set\n");
}

TEST_CASE("hosts: names, addresses, one subnet, MTU, nothing in the caller's namespace") {
  netns_hosts hosts(3, {1400, 0, 9000});
  REQUIRE(hosts.hosts() == 3);
  std::set<std::string> names, addrs;
  for (int h = 0; h < 3; ++h) {
    names.insert(hosts.ns_name(h));
    addrs.insert(hosts.address(h));
    CHECK(hosts.ns_name(h).rfind(netns_hosts::own_prefix(), 0) == 0);
    CHECK(hosts.address(h).rfind(hosts.subnet().substr(0, hosts.subnet().size() - 4), 0) == 0);
    CHECK(hosts.address(h).substr(hosts.address(h).rfind('.') + 1) == std::to_string(h + 1));
  }
  CHECK(names.size() == 3);
  CHECK(addrs.size() == 3);
  const auto show = [&](int h) { return netns_hosts::ip(hosts.ns_name(h), {"link", "show", "eth0"}).out; };
  CHECK(show(0).find("mtu 1400") != std::string::npos);
  CHECK(show(1).find("mtu 1500") != std::string::npos);
  CHECK(show(2).find("mtu 9000") != std::string::npos);
  CHECK(netns_hosts::ip(hosts.switch_name(), {"link", "show", "p0"}).out.find("mtu 1400") != std::string::npos);
  // The caller's namespace has no link of the harness.
  const auto root_links = run_checked({"ip", "-o", "link", "show"}).out;
  CHECK(root_links.find("br0") == std::string::npos);
  CHECK(root_links.find(hosts.address(0)) == std::string::npos);
  // Two sets of hosts at once get other names and (almost surely) other subnets.
  netns_hosts other(1);
  CHECK(other.ns_name(0) != hosts.ns_name(0));
}

TEST_CASE("bootstrap across namespaces: 2 hosts x 2 ranks") { bootstrap_and_compare({2, 2}); }
TEST_CASE("bootstrap across namespaces: 3 hosts x 1 rank") { bootstrap_and_compare({1, 1, 1}); }
TEST_CASE("bootstrap across namespaces: 2 hosts x 3 ranks") { bootstrap_and_compare({3, 3}); }
TEST_CASE("bootstrap across namespaces: 2 hosts x 3 ranks, round robin") {
  const rank_layout rr({3, 3}, placement::round_robin);
  const auto h = rr.host_of();
  CHECK(h == std::vector<int>{0, 1, 0, 1, 0, 1});
  CHECK(rank_layout({1, 3}, placement::round_robin).host_of() == std::vector<int>{0, 1, 1, 1});
  CHECK(rank_layout({2, 1, 2}).host_of() == std::vector<int>{0, 0, 1, 2, 2});
  bootstrap_and_compare(rr);
}

TEST_CASE("links: a host whose link is down is unreachable, and reachable again after link_up") {
  // 3 hosts x 1 rank; each rank listens on its address at port+1. In each phase the parent sets
  // the links, then every rank connects to the other hosts and says what it found.
  netns_hosts hosts(3);
  struct phase {
    const char* name;
    int down_host;  // -1: all links up
    link_end end;
  };
  const std::vector<phase> phases = {{"up", -1, link_end::host},          {"down1-host", 1, link_end::host},
                                     {"up", -1, link_end::host},          {"down1-switch", 1, link_end::switch_port},
                                     {"up", -1, link_end::host},          {"down2-both", 2, link_end::both},
                                     {"up", -1, link_end::host}};
  std::string parent_failure, seen;
  const auto res = hosts.run_ranks(
      {1, 1, 1},
      [&](rank_context& ctx) {
        const int lfd = listen_at(ctx.address, std::uint16_t(ctx.port + 1));
        auto boot = ctx.bootstrap(30s);
        boot.barrier();  // every listener is up
        for (const auto& ph : phases) {
          ctx.expect_message(ph.name, 30s);
          std::string found;
          for (int h = 0; h < 3; ++h) {
            if (h == ctx.host) continue;
            const std::string to = hosts.address(h);
            const bool cut = ph.down_host == h || ph.down_host == ctx.host;
            // Reaching waits a little for a link just set up; not reaching gets 300 ms to fail.
            const int err = cut ? try_connect(to, std::uint16_t(ctx.port + 1), 300ms)
                                : connect_within(to, std::uint16_t(ctx.port + 1), 5s);
            require(cut == (err != 0), std::string("phase ") + ph.name + ": host " + std::to_string(ctx.host) +
                                           (cut ? " reached " : " did not reach ") + to + " (" +
                                           (err ? std::strerror(err) : "connected") + ")");
            found += " " + std::to_string(h) + ":" + (err ? std::strerror(err) : "ok");
          }
          ctx.notify(std::string("ok ") + ph.name + found);
        }
        ctx.expect_message("done", 30s);
        boot.barrier();  // the bootstrap's connections lived through the cuts
        ::close(lfd);
      },
      120s,
      [&](running& run) {
        for (const auto& ph : phases) {
          for (int h = 0; h < 3; ++h) hosts.link_up(h, link_end::both);
          if (ph.down_host >= 0) hosts.link_down(ph.down_host, ph.end);
          run.send_all(ph.name);
          for (int r = 0; r < 3; ++r) {
            auto note = run.wait_note(r, 30s);
            if (!note || note->rfind(std::string("ok ") + ph.name, 0) != 0) {
              parent_failure = "phase " + std::string(ph.name) + ": rank " + std::to_string(r) + " said " +
                               (note ? "'" + *note + "'" : std::string("nothing"));
              run.send_all("abort");
              return;
            }
            seen += "rank " + std::to_string(r) + ": " + *note + "\n";
          }
        }
        run.send_all("done");
      });
  MESSAGE(seen);
  INFO(parent_failure);
  INFO(res.summary());
  CHECK(parent_failure.empty());
  CHECK(res.ok());
}

TEST_CASE("dead, failing, exiting and hung ranks are reported as such") {
  netns_hosts hosts(2);
  SUBCASE("killed by the parent, and by itself") {
    const auto res = hosts.run_ranks(
        {2, 2},
        [](rank_context& ctx) {
          if (ctx.rank == 1) {
            ctx.notify("ready");
            ctx.wait_message(60s);  // killed before
            throw netns_error("rank 1 outlived its kill");
          }
          if (ctx.rank == 3) ::raise(SIGKILL);
          ctx.output = "fine";
        },
        60s,
        [](running& run) {
          run.expect_note(1, "ready", 30s);
          run.kill_rank(1);
        });
    REQUIRE(res.ranks.size() == 4);
    INFO(res.summary());
    CHECK(res.ranks[0].status == rank_status::ok);
    CHECK(res.ranks[0].output == "fine");
    CHECK(res.ranks[2].status == rank_status::ok);
    CHECK(res.ranks[1].status == rank_status::signaled);
    CHECK(res.ranks[1].signal == SIGKILL);
    CHECK(res.ranks[3].status == rank_status::signaled);
    CHECK(res.ranks[3].signal == SIGKILL);
    CHECK(res.unfinished.empty());
    CHECK(!res.ok());
    CHECK(res.summary().find("rank 1 (host 0") != std::string::npos);
    CHECK(res.summary().find("signal 9") != std::string::npos);
  }
  SUBCASE("a rank killed during a bootstrap collective: the others report the bootstrap's error") {
    const auto res = hosts.run_ranks(
        {1, 1},
        [](rank_context& ctx) {
          auto boot = ctx.bootstrap(3s);
          boot.barrier();
          if (ctx.rank == 1) ::raise(SIGKILL);
          boot.barrier();
        },
        60s);
    REQUIRE(res.ranks.size() == 2);
    CHECK(res.ranks[1].status == rank_status::signaled);
    CHECK(res.ranks[0].status == rank_status::error);
    MESSAGE("rank 0: " << res.ranks[0].error);
    CHECK(res.ranks[0].error.find("rank 1") != std::string::npos);
  }
  SUBCASE("an exception, an _exit, a hang past the timeout") {
    const auto t0 = std::chrono::steady_clock::now();
    const auto res = hosts.run_ranks(
        {2, 1},
        [](rank_context& ctx) {
          if (ctx.rank == 0) throw std::runtime_error("rank 0 fails on purpose");
          if (ctx.rank == 1) ::_exit(3);
          std::this_thread::sleep_for(60s);  // rank 2 hangs
        },
        2s);
    const auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE(res.ranks.size() == 3);
    INFO(res.summary());
    CHECK(res.ranks[0].status == rank_status::error);
    CHECK(res.ranks[0].error == "rank 0 fails on purpose");
    CHECK(res.ranks[1].status == rank_status::exited);
    CHECK(res.ranks[1].exit_code == 3);
    CHECK(res.ranks[2].status == rank_status::timed_out);
    CHECK(res.unfinished == std::vector<int>{2});
    CHECK(res.summary().find("unfinished at the timeout: rank 2") != std::string::npos);
    CHECK(took < 10s);
  }
  SUBCASE("an exception from on_started kills the ranks and propagates") {
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(hosts.run_ranks(
                             {1, 1}, [](rank_context& ctx) { ctx.wait_message(60s); }, 60s,
                             [](running&) { throw netns_error("on_started fails on purpose"); }),
                         "on_started fails on purpose", netns_error);
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  }
}

TEST_CASE("set_delay: tc netem where there is one, else an error with tc's words") {
  netns_hosts hosts(1);
  try {
    hosts.set_delay(0, 20ms);
    CHECK(netns_hosts::ip(hosts.ns_name(0), {"link", "show", "eth0"}).out.find("netem") != std::string::npos);
    hosts.set_delay(0, 0ms);
    MESSAGE("netem is available");
  } catch (const netns_error& e) {
    MESSAGE("no netem here: " << std::string(e.what()));
    CHECK(std::string(e.what()).find("tc -n") != std::string::npos);
  }
}

TEST_CASE("leftovers of a dead run are deleted; a live run's are not") {
  // A pid that is surely gone: a child's, reaped.
  const pid_t dead = ::fork();
  REQUIRE(dead >= 0);
  if (dead == 0) ::_exit(0);
  int st = 0;
  ::waitpid(dead, &st, 0);
  const std::string stale = std::string(netns_hosts::prefix) + std::to_string(dead) + "-12345-0badc0de-0";
  run_checked({"ip", "netns", "add", stale});
  netns_hosts live(1);  // its constructor cleans up, and must not take its own or the stale one twice
  const auto now = netns_hosts::list_ours();
  CHECK(std::find(now.begin(), now.end(), stale) == now.end());
  CHECK(std::find(now.begin(), now.end(), live.ns_name(0)) != now.end());
  CHECK(netns_hosts::cleanup_stale().empty());
  if (std::find(now.begin(), now.end(), stale) != now.end()) run_command({"ip", "netns", "del", stale});
}

TEST_CASE("no namespace of this process is left") {
  // Runs last (doctest orders by file and line).
  std::string left;
  for (const auto& n : netns_hosts::list_ours())
    if (n.rfind(netns_hosts::own_prefix(), 0) == 0) left += n + " ";
  CHECK_MESSAGE(left.empty(), "left: " << left);
}
