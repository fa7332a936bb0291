// collcomm/detail/shm_segment.hpp — a POSIX shared-memory segment that the ranks of a process world map,
// and the per-rank locks that tell the living from the dead.
//
// Shared by both executors (host/process_world.hpp, gpu/process_world.hpp).
//
// Names. "/collcomm-<pid>-<start>-<pidns>-<random>-<kind>": the creator's pid, its start time
// (/proc/<pid>/stat field 22, clock ticks since boot) and its pid namespace (the inode of
// /proc/self/ns/pid), 64 random bits from getrandom(2) as 16 hex digits, and what the segment is
// (w: a host world, s: a host split or dup, g: a GPU world's control page, gc: a staged GPU world's
// connections). Nobody can predict a name, so nobody can take it first; a name that exists anyway
// (EEXIST) is retried with fresh bits, a bounded number of times. The creator tells the other ranks
// the name it actually created (over the bootstrap, or the parent world).
//
// Life of a segment (each process world does the steps, with a bootstrap or a parent world as the
// channel): one rank creates it (shm_open O_CREAT | O_EXCL, mode 0600, ftruncate, every page
// allocated), tells the others its name, they open it by name, and as soon as every rank mapped it
// the name is unlinked (the host worlds: by the last rank to map it, at once). From then on
// nothing of it is in /dev/shm: the memory lives while a process maps it or holds its descriptor,
// and goes with the last of them, even if every process is killed with SIGKILL. Every rank unlinks
// the name on its way out of an error too, once it knows it. So a name stays behind only if every
// rank that knows it dies between create and unlink (a SIGKILL of the whole job while it makes a
// world, a split or a dup). What is left then is one name per world being made, each the size of
// its segment; the next segment created by any job of this user on this host removes it
// (remove_stale_segments below: its creator's process is gone), and so does a call of
// collcomm::host::remove_stale_segments().
//
// Pages. Every page of the segment is allocated when it is created (posix_fallocate), so a
// /dev/shm without room for it is an error then, naming the segment, its size and the rank; a
// page of tmpfs first touched later, when /dev/shm may have filled up, would be a SIGBUS instead.
// The cost: a world holds its whole segment (every connection and window) in memory from the start.
//
// Liveness. Each rank holds an open-file-description lock (F_OFD_SETLK, write) on byte `rank` of
// its own descriptor of the segment. The kernel drops the lock when the process ends, however it
// ends, before it becomes a zombie. A peer tests it with F_OFD_GETLK: no holder means the rank's
// process is gone (or it left: the world marks a clean departure first, see world.hpp). Unlike
// kill(pid, 0) this does not mistake a zombie or a recycled pid for a live rank. The lock belongs
// to the open file description, so a child forked after the world was made keeps a rank "alive"
// while it runs: such a death is found by the timeout instead.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/detail/join.hpp>
#include <collcomm/error.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>

COLLCOMM_NAMESPACE_BEGIN
namespace detail {

inline std::string errno_message(const std::string& what) { return what + ": " + std::strerror(errno); }

// 64 bits from getrandom(2) (random_token's bits where it is unavailable).
inline std::uint64_t random_bits() noexcept {
  std::uint64_t x = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const ssize_t got = ::getrandom(&x, sizeof x, 0);
    if (got == static_cast<ssize_t>(sizeof x)) return x;
    if (got < 0 && errno != EINTR) break;
  }
  try {
    return random_token();
  } catch (...) {
    return mix64(static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                 (static_cast<std::uint64_t>(::getpid()) << 32));
  }
}

// Field 22 of /proc/<pid>/stat (the process's start time, clock ticks since boot); 0 when the
// process does not exist or its record cannot be read, and `gone` says whether it does not exist.
inline std::uint64_t process_start_time(const std::string& pid, bool* gone = nullptr) noexcept {
  if (gone) *gone = false;
  const int fd = ::open(("/proc/" + pid + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (gone) *gone = errno == ENOENT || errno == ESRCH;
    return 0;
  }
  char buf[1024];
  const ssize_t k = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (k <= 0) {
    if (gone) *gone = k < 0 && errno == ESRCH;  // it ended while we read
    return 0;
  }
  buf[k] = '\0';
  // "pid (comm) state ppid ...": comm may hold spaces and ')', so count from the last ')'; the
  // state is field 3, the start time field 22.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  ++p;
  for (int field = 2; field < 22 && *p != '\0'; ++p)
    if (*p == ' ') ++field;
  while (*p == ' ') ++p;
  return std::strtoull(p, nullptr, 10);
}

// This process's pid namespace (the inode of /proc/self/ns/pid); 0 when unknown.
inline std::uint64_t pid_namespace() noexcept {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

// The kinds of segment (see Names above).
inline constexpr const char* segment_kinds[] = {"w", "s", "g", "gc"};

// A fresh segment name (see Names above) for this process, `random` the 64 random bits.
inline std::string segment_name(const char* kind, std::uint64_t random) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "/collcomm-%lld-%llu-%llu-%016llx-%s", static_cast<long long>(::getpid()),
                static_cast<unsigned long long>(process_start_time("self")),
                static_cast<unsigned long long>(pid_namespace()), static_cast<unsigned long long>(random), kind);
  return buf;
}

// The parts of a segment name (without the leading '/'), if `name` is one exactly.
struct segment_name_parts {
  std::string pid;
  std::uint64_t start = 0, pid_namespace = 0;
};
inline bool parse_segment_name(const std::string& name, segment_name_parts& out) {
  static constexpr char prefix[] = "collcomm-";
  if (name.compare(0, sizeof prefix - 1, prefix) != 0) return false;
  std::size_t at = sizeof prefix - 1;
  auto field = [&](std::size_t max_len, bool hex, std::string& text) {
    const std::size_t from = at;
    while (at < name.size() && at - from < max_len &&
           ((name[at] >= '0' && name[at] <= '9') || (hex && name[at] >= 'a' && name[at] <= 'f')))
      ++at;
    if (at == from || at >= name.size() || name[at] != '-') return false;
    text = name.substr(from, at - from);
    ++at;
    return true;
  };
  std::string pid, start, ns, random;
  if (!field(10, false, pid) || !field(20, false, start) || !field(20, false, ns) || !field(16, true, random) ||
      random.size() != 16)
    return false;
  const std::string kind = name.substr(at);
  if (std::none_of(std::begin(segment_kinds), std::end(segment_kinds), [&](const char* k) { return kind == k; }))
    return false;
  out.pid = pid;
  out.start = std::strtoull(start.c_str(), nullptr, 10);
  out.pid_namespace = std::strtoull(ns.c_str(), nullptr, 10);
  return true;
}

// Whether the process that made a segment of these name parts is gone: no such pid, or one that
// started at another time (the pid was reused). A process whose record cannot be read counts as
// alive: a segment is removed only on evidence.
inline bool creator_gone(const segment_name_parts& parts) noexcept {
  bool gone = false;
  const std::uint64_t start = process_start_time(parts.pid, &gone);
  return gone || (start != 0 && start != parts.start);
}

// Removes the segments that killed jobs left in /dev/shm (see Life above): names of the library's
// form, owned by this user, made in this pid namespace by a process that is gone (no such pid, or
// one that started at another time: the pid was reused). Looks at the first `max_entries` entries
// of /dev/shm at most. Returns how many it removed. Never throws.
inline int remove_stale_segments(int max_entries = 4096) noexcept {
  int removed = 0;
  try {
    const std::uint64_t ns = pid_namespace();
    if (ns == 0) return 0;  // cannot tell whose pids the names hold
    DIR* dir = ::opendir("/dev/shm");
    if (dir == nullptr) return 0;
    const uid_t uid = ::geteuid();
    for (int seen = 0; seen < max_entries; ++seen) {
      const dirent* e = ::readdir(dir);
      if (e == nullptr) break;
      segment_name_parts parts;
      if (!parse_segment_name(e->d_name, parts) || parts.pid_namespace != ns) continue;
      struct stat st {};
      if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid)
        continue;
      if (!creator_gone(parts)) continue;  // alive, or cannot tell
      if (::shm_unlink(("/" + std::string(e->d_name)).c_str()) == 0) ++removed;
    }
    ::closedir(dir);
  } catch (...) {}
  return removed;
}

class shm_segment {
 public:
  // How many fresh names create tries when each one already exists.
  static constexpr int create_attempts = 16;

  shm_segment() = default;
  shm_segment(shm_segment&& o) noexcept
      : fd_(std::exchange(o.fd_, -1)),
        base_(std::exchange(o.base_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)),
        name_(std::move(o.name_)) {}
  shm_segment& operator=(shm_segment&& o) noexcept {
    if (this != &o) {
      release();
      fd_ = std::exchange(o.fd_, -1);
      base_ = std::exchange(o.base_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      name_ = std::move(o.name_);
    }
    return *this;
  }
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;
  ~shm_segment() { release(); }

  // Creates a segment of `kind` (see Names above) of `bytes` bytes under a fresh name (name()),
  // allocates every page (see Pages above) and maps it. First removes what killed jobs left
  // (remove_stale_segments). `random` gives each try's random bits. Throws errc::system naming the
  // rank, the segment and what failed; on failure the name is unlinked again.
  static shm_segment create(const char* kind, std::size_t bytes, int rank,
                            std::uint64_t (*random)() noexcept = random_bits) {
    remove_stale_segments();
    shm_segment s;
    for (int attempt = 0; s.fd_ < 0; ++attempt) {
      s.name_ = segment_name(kind, random());
      s.fd_ = ::shm_open(s.name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
      if (s.fd_ < 0 && (errno != EEXIST || attempt + 1 == create_attempts))
        fail(rank, errno_message("shm_open(" + s.name_ + ", O_CREAT | O_EXCL)" +
                                 (errno == EEXIST ? " (" + std::to_string(create_attempts) + " fresh names tried)"
                                                  : std::string())));
    }
    const std::string& name = s.name_;
    try {
      const std::string size = std::to_string(bytes) + " bytes (" + std::to_string(bytes >> 20) + " MiB)";
      const std::string hint =
          ": enlarge /dev/shm (docker: --shm-size) or lower the options window_bytes, slots, slot_bytes or channels";
      struct statvfs vfs {};
      if (::fstatvfs(s.fd_, &vfs) == 0) {
        const unsigned long long avail = static_cast<unsigned long long>(vfs.f_bavail) * vfs.f_frsize;
        if (avail < bytes)
          fail(rank, "shared memory (/dev/shm) has " + std::to_string(avail >> 20) + " MiB free, segment " + name +
                         " needs " + size + hint);
      }
      if (::ftruncate(s.fd_, static_cast<off_t>(bytes)) != 0)
        fail(rank, errno_message("ftruncate(" + name + ", " + size + ")"));
      int rc = 0;
      do rc = ::posix_fallocate(s.fd_, 0, static_cast<off_t>(bytes));
      while (rc == EINTR);
      if (rc != 0) {
        errno = rc;
        fail(rank, errno_message("posix_fallocate(" + name + ", " + size + ")") +
                       (rc == ENOSPC ? "; shared memory (/dev/shm) has no room for the segment" + hint : ""));
      }
      s.map(bytes, rank);
    } catch (...) {
      ::shm_unlink(name.c_str());
      throw;
    }
    return s;
  }

  // Opens and maps `name`, which must hold exactly `bytes` bytes.
  static shm_segment open(const std::string& name, std::size_t bytes, int rank) {
    shm_segment s;
    s.name_ = name;
    s.fd_ = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (s.fd_ < 0) fail(rank, errno_message("shm_open(" + name + ")"));
    struct stat st {};
    if (::fstat(s.fd_, &st) != 0) fail(rank, errno_message("fstat(" + name + ")"));
    if (static_cast<std::size_t>(st.st_size) != bytes)
      fail(rank, "segment " + name + " has " + std::to_string(st.st_size) + " bytes, this rank expects " +
                     std::to_string(bytes) + ": the ranks disagree on the world's size or options");
    s.map(bytes, rank);
    return s;
  }

  static void unlink(const std::string& name) noexcept {  // ENOENT is fine
    if (!name.empty()) ::shm_unlink(name.c_str());
  }

  std::byte* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return bytes_; }
  // The name it was created or opened under (unlinked or not).
  const std::string& name() const noexcept { return name_; }
  explicit operator bool() const noexcept { return base_ != nullptr; }

  // Takes this process's liveness lock for `rank` (see the file comment).
  void lock_rank(int rank) {
    struct flock l = lock_of(rank, F_WRLCK);
    if (::fcntl(fd_, F_OFD_SETLK, &l) != 0) fail(rank, errno_message("fcntl(F_OFD_SETLK) on the segment"));
  }
  // Whether some process holds `rank`'s liveness lock. An error of the test counts as held (the
  // timeout stays the backstop): a rank is declared dead only on evidence.
  bool rank_lock_held(int rank) const noexcept {
    struct flock l = lock_of(rank, F_WRLCK);
    if (::fcntl(fd_, F_OFD_GETLK, &l) != 0) return true;
    return l.l_type != F_UNLCK;
  }

 private:
  [[noreturn]] static void fail(int rank, const std::string& msg) {
    collcomm::detail::fail(errc::system, "shared-memory segment", rank, msg);
  }

  static struct flock lock_of(int rank, short type) noexcept {
    struct flock l {};
    l.l_type = type;
    l.l_whence = SEEK_SET;
    l.l_start = static_cast<off_t>(rank);
    l.l_len = 1;
    l.l_pid = 0;  // required by the OFD calls
    return l;
  }

  void map(std::size_t bytes, int rank) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) fail(rank, errno_message("mmap(" + name_ + ", " + std::to_string(bytes) + " bytes)"));
    base_ = static_cast<std::byte*>(p);
    bytes_ = bytes;
  }

  void release() noexcept {
    if (base_ != nullptr) ::munmap(base_, bytes_);
    if (fd_ >= 0) ::close(fd_);  // drops this process's liveness lock
    base_ = nullptr;
    bytes_ = 0;
    fd_ = -1;
  }

  int fd_ = -1;
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::string name_;
};

}  // namespace detail
COLLCOMM_NAMESPACE_END
