// The shared-memory segments of host worlds of processes (labels mp, fault):
//   * names: nobody can take a split's or dup's name first (names of the old, derived scheme
//     squatted in /dev/shm change nothing), consecutive dups use unrelated names, and a name that
//     exists is retried with fresh random bits, a bounded number of times;
//   * options whose sizes overflow: a clean collcomm::error naming them, for worlds of threads and
//     of processes, never a SIGSEGV or std::bad_alloc;
//   * a full /dev/shm (a private 8 MiB tmpfs): a world that does not fit is an error at creation
//     naming the segment and its size; one that fits keeps working after /dev/shm filled up;
//   * names left by processes killed before they unlinked them are removed by the next world's
//     creation and by host::remove_stale_segments(), and a live process's are not.
#include "test_host_fork.hpp"

#include <collcomm/host.hpp>

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <fstream>
#include <optional>

using namespace collcomm_test::mp;
namespace cc = collcomm;

namespace {

// The collcomm segments this process maps (by /proc/self/maps).
std::set<std::string> mapped_segments() {
  std::ifstream f("/proc/self/maps");
  std::set<std::string> s;
  for (std::string line; std::getline(f, line);)
    if (std::string name = segment_of_maps_line(line); !name.empty()) s.insert(name);
  return s;
}

// The one segment in `after` that is not in `before` ("" if not exactly one).
std::string new_segment(const std::set<std::string>& before, const std::set<std::string>& after) {
  std::string found;
  for (const std::string& s : after)
    if (!before.count(s)) {
      if (!found.empty()) return {};
      found = s;
    }
  return found;
}

// The random part of a segment name (its 16 hex digits).
std::string random_part(const std::string& name) {
  const std::size_t end = name.rfind('-'), begin = name.rfind('-', end - 1);
  return name.substr(begin + 1, end - begin - 1);
}

bool squat(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// /proc/<pid>/stat field 22, read independently of the library.
unsigned long long start_time(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream rest(all.substr(all.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) rest >> field;
  return std::stoull(field);
}
unsigned long long pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}
// A name of the library's form for process `pid`, started at `start`.
std::string library_like_name(pid_t pid, unsigned long long start, const char* kind) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "/collcomm-%d-%llu-%llu-%016llx-%s", static_cast<int>(pid), start, pid_namespace(),
                static_cast<unsigned long long>(std::random_device{}()) << 20 | 0x5a5a5ull, kind);
  return buf;
}
bool exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm" + name).c_str(), &st) == 0;
}

// A bootstrap of `n` ranks in which this process is rank 0 and every peer says what it says:
// set-up code runs as on a world of n processes, without them.
class mirror_bootstrap {
 public:
  explicit mirror_bootstrap(int n) : n_(n) {}
  int rank() const noexcept { return 0; }
  int size() const noexcept { return n_; }
  void all_gather(std::span<const std::byte> in, std::span<std::byte> out) {
    for (int q = 0; q < n_; ++q)
      std::memcpy(out.data() + static_cast<std::size_t>(q) * in.size(), in.data(), in.size());
  }
  void barrier() {}
  void send(int, std::span<const std::byte>) { throw std::logic_error("mirror_bootstrap: no send"); }
  void recv(int, std::span<std::byte>) { throw std::logic_error("mirror_bootstrap: no recv"); }

 private:
  int n_;
};

}  // namespace

TEST_CASE("segment names: squatted names of the derived scheme do not block split and dup; dups' names are unrelated") {
  const int n = 3;
  reports rep(n);
  auto j = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        cc::host::options opt;
        opt.timeout = 10s;
        opt.window_bytes = 1 << 20;
        const auto none = mapped_segments();
        host_comm comm(boot, opt);
        const int r = comm.rank();
        const auto with_parent = mapped_segments();
        const std::string parent = new_segment(none, with_parent);
        if (parent.empty() || parent.substr(parent.size() - 2) != "-w")
          return child_fail(me, r, 10, "the world's segment is not one mapping of kind w");
        // Another user who saw the world's name: the names the splits would have under a scheme
        // derived from it ("/collcomm-<token>-s<seq>r<leader>"), taken first.
        std::vector<std::string> squatted;
        if (r == 0)
          for (int seq = 1; seq <= 8; ++seq)
            for (int leader = 0; leader < n; ++leader) {
              char name[128];
              std::snprintf(name, sizeof name, "/collcomm-%016llx-s%dr%d",
                            static_cast<unsigned long long>(comm.host_world().token()), seq, leader);
              if (squat(name)) squatted.push_back(name);
            }
        if (!sum_is<cc::algo::ring>(comm, 1, n, 100))
          return child_fail(me, r, 11, "all_reduce wrong");  // squatted by now
        int code = 0;
        try {
          auto d1 = comm.dup();
          const auto with_d1 = mapped_segments();
          auto d2 = comm.dup();
          const std::string n1 = new_segment(with_parent, with_d1), n2 = new_segment(with_d1, mapped_segments());
          auto half = comm.split(r % 2, r);
          if (n1.empty() || n2.empty()) {
            code = child_fail(me, r, 12, "a dup's segment is not one new mapping of a segment name");
          } else if (n1.substr(n1.size() - 2) != "-s" || n2.substr(n2.size() - 2) != "-s") {
            code = child_fail(me, r, 13, "dups' segments %s, %s are not of kind s", n1.c_str(), n2.c_str());
          } else if (random_part(n1) == random_part(n2) || random_part(n1) == random_part(parent)) {
            code = child_fail(me, r, 14, "names share their random part: %s, %s, %s", parent.c_str(), n1.c_str(),
                              n2.c_str());
          } else if (!half || !sum_is<cc::algo::ring>(d1, 1, n, 100) || !sum_is<cc::algo::ring>(d2, 2, 2 * n, 100) ||
                     !sum_is<cc::algo::ring>(*half, 1, half->size(), 100)) {
            code = child_fail(me, r, 15, "a collective on a dup or split is wrong");
          }
        } catch (const cc::error& e) {
          code = child_fail(me, r, 16, "split or dup failed: %s", e.what());
        }
        for (const std::string& s : squatted) ::shm_unlink(s.c_str());
        return code;
      },
      rep, 60s);
  for (int r = 0; r < n; ++r)
    CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "rank " << r << ": " << rep[r].msg);
}

namespace {
std::uint64_t squatted_bits = 0;
int draws = 0;
std::uint64_t squatted_three_times() noexcept { return ++draws <= 3 ? squatted_bits : squatted_bits + draws; }
std::uint64_t always_squatted() noexcept { return squatted_bits; }
}  // namespace

TEST_CASE("segment names: a name that exists is retried with fresh bits, a bounded number of times") {
  namespace cd = cc::detail;
  squatted_bits = (static_cast<std::uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  const std::string taken = cd::segment_name("s", squatted_bits);
  REQUIRE(squat(taken));
  {
    draws = 0;
    auto seg = cd::shm_segment::create("s", 4096, 0, squatted_three_times);
    CHECK(draws == 4);
    CHECK(seg.name() != taken);
    CHECK(is_segment_name(seg.name().substr(1)));
    cd::shm_segment::unlink(seg.name());
  }
  CHECK_THROWS_WITH_AS(cd::shm_segment::create("s", 4096, 0, always_squatted),
                       doctest::Contains("16 fresh names tried"), cc::error);
  ::shm_unlink(taken.c_str());
}

TEST_CASE("options whose sizes overflow: a clean error naming them, threads and processes") {
  // 1024 ranks x 64 channels x 2^16 slots of 4194240 + 64 bytes: the connections of a segment
  // take 2^64 + 2^33 bytes.
  cc::host::options huge;
  huge.channels = 64;
  huge.slots = 1 << 16;
  huge.slot_bytes = (std::size_t{1} << 22) - 64;
  CHECK_THROWS_WITH_AS(cc::host::detail::segment_layout(1024, huge), doctest::Contains("'slot_bytes'"), cc::error);
  // 2^16 slots of 2^29 bytes: connections of 2^45 bytes, more than any host's memory.
  cc::host::options large;
  large.channels = 1;
  large.slots = 1 << 16;
  large.slot_bytes = std::size_t{1} << 29;
  // A world of processes (this one as rank 0 of 1024: every set-up step runs up to the segment).
  for (const auto& opt : {huge, large}) {
    const auto before = collcomm_segments();
    mirror_bootstrap boot(1024);
    try {
      auto w = cc::host::make_process_world(boot, opt);
      FAIL("a world of 1024 processes with these options was made");
    } catch (const cc::error& e) {
      CHECK(e.code() == cc::errc::invalid_argument);
      CHECK_MESSAGE(std::string(e.what()).find("'slot_bytes'") != std::string::npos, e.what());
    }
    CHECK(collcomm_segments() == before);
  }
  // A world of threads: refused when made, not a std::bad_alloc on the first call.
  try {
    cc::host::world w(2, large);
    cc::host::run_ranks(w, [&](host_comm& comm) { sum_is<cc::algo::ring>(comm, 1, 2, 1000); });
    FAIL("a world of threads with these options was made and used");
  } catch (const cc::error& e) {
    CHECK(e.code() == cc::errc::invalid_argument);
    CHECK_MESSAGE(std::string(e.what()).find("'slot_bytes'") != std::string::npos, e.what());
  }
  // Real processes, a segment of 2 x 2^40 bytes of windows: an error on every rank at creation.
  const int n = 2;
  reports rep(n);
  auto j = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        cc::host::options opt;
        opt.timeout = 10s;
        opt.window_bytes = cc::common_options::max_window_bytes;
        try {
          host_comm comm(boot, opt);
          return child_fail(me, boot.rank(), 20, "a world with 2 x 2^40 bytes of windows was made");
        } catch (const cc::error& e) {
          if (std::string(e.what()).find("could not join") == std::string::npos)
            return child_fail(me, boot.rank(), 21, "wrong error: %s", e.what());
        }
        return 0;
      },
      rep, 60s);
  for (int r = 0; r < n; ++r)
    CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "rank " << r << ": " << rep[r].msg);
}

namespace {

// In a child with a private mount namespace and an 8 MiB tmpfs on /dev/shm: a world that does not
// fit, then one that fits and keeps working after /dev/shm filled up. Returns the exit code: 0
// passed, 77 skipped (printed), else failed (printed).
int full_shm_child() {
  if (::geteuid() != 0) {
    std::printf("skipped: a private /dev/shm needs root\n");
    return 77;
  }
  if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=8m,mode=1777") != 0) {
    std::printf("skipped: no private tmpfs on /dev/shm (%s)\n", std::strerror(errno));
    return 77;
  }
  const int n = 2;
  reports rep(n);
  // 2 x 8 MiB of windows: does not fit.
  auto j = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        cc::host::options opt;
        opt.timeout = 10s;
        opt.window_bytes = 8 << 20;
        try {
          host_comm comm(boot, opt);
          return child_fail(me, boot.rank(), 30, "a world larger than /dev/shm was made");
        } catch (const cc::error& e) {
          const std::string m = e.what();
          if (e.code() != cc::errc::system || m.find("/dev/shm") == std::string::npos ||
              m.find("/collcomm-") == std::string::npos || m.find(" bytes") == std::string::npos ||
              m.find("rank 0") == std::string::npos)
            return child_fail(me, boot.rank(), 31, "wrong error: %s", e.what());
        }
        return 0;
      },
      rep, 60s);
  int failed = 0;
  for (int r = 0; r < n; ++r)
    if (j.codes[static_cast<std::size_t>(r)] != 0) {
      std::printf("a world that does not fit: rank %d: code %d: %s\n", r, j.codes[static_cast<std::size_t>(r)],
                  rep[r].msg);
      failed = 1;
    }
  // 2 x 1 MiB of windows fits; then /dev/shm fills up, and calls touch every window and slot.
  reports rep2(n);
  auto j2 = run_job(
      n,
      [&](bs::tcp& boot, rank_report& me) {
        cc::host::options opt;
        opt.timeout = 10s;
        opt.window_bytes = 1 << 20;
        host_comm comm(boot, opt);
        const int r = comm.rank();
        if (r == 0) {
          const int fd = ::open("/dev/shm/filler", O_CREAT | O_WRONLY | O_TRUNC, 0600);
          std::vector<char> block(1 << 16, 'x');
          while (fd >= 0 && ::write(fd, block.data(), block.size()) > 0) {}
          if (fd >= 0) ::close(fd);
        }
        if (!sum_is<cc::algo::ring>(comm, 1, n, 16))
          return child_fail(me, r, 40, "all_reduce wrong");  // /dev/shm is full now
        struct statvfs vfs {};
        if (r == 0 && ::statvfs("/dev/shm", &vfs) == 0 && vfs.f_bavail * vfs.f_frsize >= (1 << 16))
          return child_fail(me, r, 41, "/dev/shm did not fill up");
        // one_shot stages its input and output through the whole window.
        std::vector<float> in((1 << 20) / sizeof(float) / 2 - 1024, 1.0f), out(in.size(), 0.0f);
        for (int i = 0; i < 3; ++i) {
          cc::all_reduce<cc::algo::one_shot>(comm, in.data(), out.data(), in.size());
          if (out.front() != float(n) || out.back() != float(n))
            return child_fail(me, r, 43, "one_shot all_reduce wrong");
          if (!sum_is<cc::algo::ring>(comm, 1, n, 64 << 10)) return child_fail(me, r, 42, "ring all_reduce wrong");
        }
        return 0;
      },
      rep2, 60s);
  for (int r = 0; r < n; ++r)
    if (j2.codes[static_cast<std::size_t>(r)] != 0) {
      std::printf("a world that fits, /dev/shm filled: rank %d: code %d%s: %s\n", r,
                  j2.codes[static_cast<std::size_t>(r)],
                  j2.codes[static_cast<std::size_t>(r)] == -SIGBUS ? " (SIGBUS)" : "", rep2[r].msg);
      failed = 1;
    }
  return failed;
}

}  // namespace

TEST_CASE("a full /dev/shm: an error when the world is made, never a SIGBUS later") {
  std::fflush(stdout);
  const pid_t p = ::fork();
  REQUIRE(p >= 0);
  if (p == 0) {
    const int code = full_shm_child();
    std::fflush(stdout);
    ::_exit(code);
  }
  int st = 0;
  ::waitpid(p, &st, 0);
  REQUIRE(WIFEXITED(st));
  if (WEXITSTATUS(st) == 77) {
    MESSAGE("skipped: no private tmpfs on /dev/shm (see the line above)");
    return;
  }
  CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("stale segments: what a killed creator left is removed by the next world and by remove_stale_segments") {
  // A child makes a segment of the library's name form and is killed before it unlinks it.
  auto killed_creator = [](const char* kind) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::fflush(stdout);
    const pid_t p = ::fork();
    REQUIRE(p >= 0);
    if (p == 0) {
      const std::string name = library_like_name(::getpid(), start_time(::getpid()), kind);
      const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0 || ::ftruncate(fd, 1 << 16) != 0) ::_exit(1);
      (void)!::write(fds[1], name.c_str(), name.size() + 1);
      ::raise(SIGKILL);
    }
    ::close(fds[1]);
    char buf[128] = {};
    const ssize_t k = ::read(fds[0], buf, sizeof buf - 1);
    ::close(fds[0]);
    int st = 0;
    ::waitpid(p, &st, 0);
    CHECK(WIFSIGNALED(st));
    REQUIRE(k > 0);
    REQUIRE(exists(buf));
    return std::string(buf);
  };

  SUBCASE("the next world's creation removes it") {
    const std::string a = killed_creator("w"), b = killed_creator("s");
    const int n = 2;
    reports rep(n);
    auto j = run_job(
        n,
        [&](bs::tcp& boot, rank_report& me) {
          host_comm comm(boot);
          return sum_is<cc::algo::ring>(comm, 1, n, 10) ? 0 : child_fail(me, comm.rank(), 50, "all_reduce wrong");
        },
        rep, 60s);
    for (int r = 0; r < n; ++r)
      CHECK_MESSAGE(j.codes[static_cast<std::size_t>(r)] == 0, "rank " << r << ": " << rep[r].msg);
    CHECK_MESSAGE(!exists(a), a << " is still in /dev/shm");
    CHECK_MESSAGE(!exists(b), b << " is still in /dev/shm");
  }
  SUBCASE("remove_stale_segments removes it; a live creator's names stay, a reused pid's go") {
    const std::string dead = killed_creator("g");
    const std::string live = library_like_name(::getpid(), start_time(::getpid()), "w");
    const std::string reused = library_like_name(::getpid(), start_time(::getpid()) + 1, "gc");
    REQUIRE(squat(live));
    REQUIRE(squat(reused));
    cc::host::remove_stale_segments();  // (a world made beside this test may remove them first)
    CHECK_MESSAGE(!exists(dead), dead << " is still in /dev/shm");
    CHECK_MESSAGE(!exists(reused), reused << " is still in /dev/shm");
    CHECK_MESSAGE(exists(live), live << " (this process's) was removed");
    ::shm_unlink(live.c_str());
  }
}

TEST_CASE("stale segments: a job killed whole while it dups leaves nothing after the next world") {
  std::mt19937_64 rng(fresh_seed("killed dups"));
  const auto before = collcomm_segments();
  for (int trial = 0; trial < 6; ++trial) {
    const int n = 3;
    reports rep(n);
    const auto delay = std::chrono::milliseconds(50 + rng() % 400);
    run_job(
        n,
        [&](bs::tcp& boot, rank_report&) {
          cc::host::options opt;
          opt.window_bytes = 1 << 20;
          host_comm comm(boot, opt);
          for (;;) auto d = comm.dup();
          return 0;
        },
        rep, 30s, 10s,
        [&](const std::vector<pid_t>& pids) {
          std::this_thread::sleep_for(delay);
          for (pid_t p : pids) ::kill(p, SIGKILL);
        });
  }
  reports rep(2);
  auto j = run_job(
      2,
      [&](bs::tcp& boot, rank_report&) {
        host_comm comm(boot);
        return 0;
      },
      rep, 60s);
  CHECK(j.codes[0] == 0);
  CHECK(j.codes[1] == 0);
  const auto leaked = leaked_segments(before);
  CHECK_MESSAGE(leaked.empty(), "segments left in /dev/shm: " << (leaked.empty() ? "" : *leaked.begin()));
}

// Rank 0 creates the world's segment, but rank 2 is gone before the exchange that hands its name
// out (it took part in the hello, then exited): rank 0 itself must remove the name it made.
TEST_CASE("a rank that leaves before the segment's name is handed out: its creator removes the name") {
  auto id = cc::bootstrap::unique_id::create();
  cc::host::options opt;
  opt.window_bytes = 1 << 20;
  opt.timeout = std::chrono::seconds(2);
  std::vector<pid_t> pids;
  for (int r = 0; r < 3; ++r) {
    const pid_t p = ::fork();
    REQUIRE(p >= 0);
    if (p == 0) {
      if (r != 0) cc::bootstrap::release_listener(id);
      cc::bootstrap::tcp boot(id, r, 3, std::chrono::seconds(5));
      if (r == 2) {  // the hello of make_process_world, with the same options, then gone
        cc::host::detail::hello_record h{0, ::getpid(), opt.channels, opt.slots, opt.slot_bytes, opt.window_bytes};
        std::vector<std::byte> all(3 * sizeof h);
        boot.all_gather(std::span<const std::byte>(reinterpret_cast<const std::byte*>(&h), sizeof h), all);
        ::_exit(0);
      }
      try {
        host_comm comm(boot, opt);
        ::_exit(70);  // a world without rank 2
      } catch (const cc::error& e) {
        ::_exit(std::string(e.what()).find("rank 2") == std::string::npos ? 71 : 0);
      }
    }
    pids.push_back(p);
  }
  cc::bootstrap::release_listener(id);
  for (int r = 0; r < 3; ++r) {
    int st = 0;
    ::waitpid(pids[static_cast<std::size_t>(r)], &st, 0);
    CHECK_MESSAGE((WIFEXITED(st) && WEXITSTATUS(st) == 0), "rank " << r);
  }
  const std::string mine = "collcomm-" + std::to_string(pids[0]) + "-";
  int left = 0;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) left += std::string(e->d_name).rfind(mine, 0) == 0;
    ::closedir(d);
  }
  CHECK(left == 0);
}
