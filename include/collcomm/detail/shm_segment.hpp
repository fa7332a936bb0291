// collcomm/detail/shm_segment.hpp — a POSIX shared-memory segment that the ranks of a process world map,
// and the per-rank locks that tell the living from the dead.
//
// Shared by both executors (host/process_world.hpp, gpu/process_world.hpp).
// Life of a segment (each process world does the steps, with a bootstrap or a parent world as the
// channel): one rank creates it (shm_open O_CREAT | O_EXCL, mode 0600, ftruncate), the others open
// it by name, and as soon as every rank mapped it the name is unlinked. From then on nothing of it
// is in /dev/shm: the memory lives while a process maps it or holds its descriptor, and goes with
// the last of them, even if every process is killed with SIGKILL. Every rank learns the name
// before it is created and unlinks it on its way out, of an error too; so a name stays behind
// only if every rank dies inside the short window between create and unlink.
//
// Pages. The file is sparse: ftruncate reserves nothing, and a page of tmpfs is allocated (zeroed)
// when first touched. So a world sized for every connection and window costs only what it uses.
// A touch that finds /dev/shm full is a SIGBUS, not an error code, hence the free-space check when
// the segment is created, and the control part (counters, doorbells) is allocated at once.
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
#include <collcomm/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

COLLCOMM_NAMESPACE_BEGIN
namespace detail {

inline std::string errno_message(const std::string& what) { return what + ": " + std::strerror(errno); }

// "/collcomm-<16 hex digits>-<suffix>": the job token keeps jobs apart, the suffix the segments of
// one job (its first world, its splits).
inline std::string segment_name(std::uint64_t token, const std::string& suffix) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(token));
  return std::string("/collcomm-") + hex + "-" + suffix;
}

class shm_segment {
 public:
  shm_segment() = default;
  shm_segment(shm_segment&& o) noexcept
      : fd_(std::exchange(o.fd_, -1)), base_(std::exchange(o.base_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  shm_segment& operator=(shm_segment&& o) noexcept {
    if (this != &o) {
      release();
      fd_ = std::exchange(o.fd_, -1);
      base_ = std::exchange(o.base_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;
  ~shm_segment() { release(); }

  // Creates `name` of `bytes` bytes (refusing an existing name), allocates its first
  // `allocate_bytes` and maps it. Throws errc::system naming the rank and what failed; on failure
  // the name is unlinked again.
  static shm_segment create(const std::string& name, std::size_t bytes, std::size_t allocate_bytes, int rank) {
    shm_segment s;
    s.fd_ = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (s.fd_ < 0) fail(rank, errno_message("shm_open(" + name + ", O_CREAT | O_EXCL)"));
    try {
      struct statvfs vfs {};
      if (::fstatvfs(s.fd_, &vfs) == 0) {
        const unsigned long long avail = static_cast<unsigned long long>(vfs.f_bavail) * vfs.f_frsize;
        if (avail < bytes)
          fail(rank, "shared memory (/dev/shm) has " + std::to_string(avail >> 20) +
                         " MiB free, the segment needs up to " + std::to_string(bytes >> 20) + " MiB (" +
                         std::to_string(bytes) +
                         " bytes): enlarge /dev/shm (docker: --shm-size) or lower host::options window_bytes, "
                         "slots, slot_bytes or channels");
      }
      if (::ftruncate(s.fd_, static_cast<off_t>(bytes)) != 0) fail(rank, errno_message("ftruncate(" + name + ")"));
      if (allocate_bytes > 0) {
        const int rc = ::posix_fallocate(s.fd_, 0, static_cast<off_t>(allocate_bytes));
        if (rc != 0) {
          errno = rc;
          fail(rank, errno_message("posix_fallocate(" + name + ", " + std::to_string(allocate_bytes) + " bytes)"));
        }
      }
      s.map(bytes, rank, name);
    } catch (...) {
      ::shm_unlink(name.c_str());
      throw;
    }
    return s;
  }

  // Opens and maps `name`, which must hold exactly `bytes` bytes.
  static shm_segment open(const std::string& name, std::size_t bytes, int rank) {
    shm_segment s;
    s.fd_ = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (s.fd_ < 0) fail(rank, errno_message("shm_open(" + name + ")"));
    struct stat st {};
    if (::fstat(s.fd_, &st) != 0) fail(rank, errno_message("fstat(" + name + ")"));
    if (static_cast<std::size_t>(st.st_size) != bytes)
      fail(rank, "segment " + name + " has " + std::to_string(st.st_size) + " bytes, this rank expects " +
                     std::to_string(bytes) + ": the ranks disagree on the world's size or options");
    s.map(bytes, rank, name);
    return s;
  }

  static void unlink(const std::string& name) noexcept { ::shm_unlink(name.c_str()); }  // ENOENT is fine

  std::byte* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return bytes_; }
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
    collcomm::detail::fail(errc::system, "host segment", rank, msg);
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

  void map(std::size_t bytes, int rank, const std::string& name) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) fail(rank, errno_message("mmap(" + name + ", " + std::to_string(bytes) + " bytes)"));
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
};

}  // namespace detail
COLLCOMM_NAMESPACE_END
