// collcomm/error.hpp — the one error scheme of the host API.
//
// Every host-side failure throws `collcomm::error`. Its message always names what was wrong and,
// where one is known, the rank that saw it ("collcomm: all_reduce on rank 3: argument 'recv' is
// null while count = 12 > 0"). A call that throws has not touched its output buffer: argument
// checks run before any data moves.
#pragma once

#include <collcomm/config.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

COLLCOMM_NAMESPACE_BEGIN

enum class errc {
  invalid_argument,  // a bad pointer, count, root, rank, overlap: the caller's mistake
  invalid_usage,     // a call the communicator cannot take in its state (after abort, ...)
  timeout,           // a bounded wait ran out: a peer did not arrive
  aborted,           // the communicator was aborted by some rank
  system,            // the OS, CUDA or a transport failed
  internal,          // a collcomm bug: please report it
};

constexpr std::string_view to_string(errc c) noexcept {
  switch (c) {
    case errc::invalid_argument:
      return "invalid argument";
    case errc::invalid_usage:
      return "invalid usage";
    case errc::timeout:
      return "timeout";
    case errc::aborted:
      return "aborted";
    case errc::system:
      return "system error";
    case errc::internal:
      return "internal error";
  }
  return "unknown error";
}

inline constexpr int no_rank = -1;

class error : public std::runtime_error {
 public:
  error(errc code, int rank, std::string what) : std::runtime_error(std::move(what)), code_(code), rank_(rank) {}
  errc code() const noexcept { return code_; }
  // The rank that detected the error (no_rank where none applies).
  int rank() const noexcept { return rank_; }

 private:
  errc code_;
  int rank_;
};

namespace detail {

// "collcomm: <where> on rank <r>: <msg>"
inline std::string format_error(std::string_view where, int rank, std::string_view msg) {
  std::string s = "collcomm: ";
  s += where;
  if (rank != no_rank) {
    s += " on rank ";
    s += std::to_string(rank);
  }
  s += ": ";
  s += msg;
  return s;
}

[[noreturn]] inline void fail(errc code, std::string_view where, int rank, std::string_view msg) {
  throw error(code, rank, format_error(where, rank, msg));
}

}  // namespace detail

COLLCOMM_NAMESPACE_END
