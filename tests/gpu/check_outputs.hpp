// tests/gpu/check_outputs.hpp — one rank's device buffers for one collective call, and the check of
// its output against the exact reference (tests/common/exact_reference.hpp). Every GPU test that
// runs a collective on data lays out, poisons and checks its buffers here:
//
//   * the output buffer is allocated with one element past its end, and all of it (the element past
//     the end too) is filled with poison bytes (0xA5) before the input is written;
//   * in place, the input is written inside the output buffer, where the kind's in-place form puts
//     it (kinds.hpp): at rank * count for all_gather and the gather root, at 0 for all_reduce,
//     broadcast and reduce; reduce_scatter's output is block `rank` of its input instead;
//   * after the call, every element of a significant output must equal the reference bit for bit
//     (the inputs make every reduction order exact); a rank without a significant output (reduce
//     and gather off the root) must leave its whole output buffer poisoned, unless the buffer holds
//     its input (in place); and the element past the end must still hold poison.
#pragma once

#include <collcomm/gpu.hpp>
#include <common/exact_reference.hpp>

#include <cuda_runtime.h>

#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace collcomm_gpu_test {
using namespace collcomm;
using namespace collcomm_test;

// The byte every output buffer is filled with before a call.
inline constexpr int poison_byte = 0xA5;

template <class T>
T poison_value() {
  T p;
  std::memset(static_cast<void*>(&p), poison_byte, sizeof(T));
  return p;
}

// Where one rank's buffers of one call lie, in elements.
struct buffer_layout {
  index_t in_elems = 0;     // the rank's input (input_elems of the kind)
  index_t out_elems = 0;    // the kind's output (output_elems)
  index_t alloc_elems = 0;  // the output buffer, not counting the poisoned element past its end
  long in_at = -1;          // where the input lies inside the output buffer (in place), or -1: a buffer of its own
  index_t out_at = 0;       // where the call's output starts inside the output buffer
  bool holds_input() const { return in_at >= 0; }
};

// Where the input sits inside the output buffer of an in-place call (elements), or -1 where the
// rank's in-place form keeps no input there (gather off the root) or the kind has none.
template <class K>
long in_place_offset(const case_config& c, int rank) {
  if constexpr (std::is_same_v<K, kind::all_reduce> || std::is_same_v<K, kind::broadcast> ||
                std::is_same_v<K, kind::reduce>)
    return 0;
  else if constexpr (std::is_same_v<K, kind::all_gather>)
    return static_cast<long>(rank * c.count);
  else if constexpr (std::is_same_v<K, kind::gather>)
    return rank == c.root ? static_cast<long>(rank * c.count) : -1;
  else
    return -1;
}

template <class K>
buffer_layout layout_of(const case_config& c, int rank) {
  coll_args a{};
  a.nranks = c.nranks;
  a.count = c.count;
  a.root = c.root;
  a.rank = rank;
  buffer_layout l;
  l.in_elems = input_elems<K>(a);
  l.out_elems = output_elems<K>(a);
  l.alloc_elems = l.out_elems;
  if (c.in_place && std::is_same_v<K, kind::reduce_scatter>) {
    // The output is block `rank` of the input: one buffer, the size of the input.
    l.alloc_elems = l.in_elems;
    l.in_at = 0;
    l.out_at = static_cast<index_t>(rank) * c.count;
  } else if (c.in_place) {
    l.in_at = in_place_offset<K>(c, rank);
  }
  return l;
}

// `got` (the whole output buffer and the element past its end, as copied back from the device)
// against `expect` (the rank's reference; nullopt where the rank has no significant output).
// Returns "" or the first wrong element, how many were wrong, and a write past the end; `who`
// starts the message ("rank 2", "call 7").
template <class T>
std::string check_output(const std::vector<T>& got, const std::optional<std::vector<T>>& expect, const buffer_layout& l,
                         const std::string& who) {
  const T poison = poison_value<T>();
  std::ostringstream msg;
  if (got.size() != static_cast<std::size_t>(l.alloc_elems) + 1) {
    msg << who << ": " << got.size() << " elements to check, the buffer has " << l.alloc_elems + 1;
    return msg.str();
  }
  index_t wrong = 0;
  if (expect) {
    const std::vector<T>& ex = *expect;
    for (index_t i = 0; i < static_cast<index_t>(ex.size()); ++i)
      if (!same_bits(got[l.out_at + i], ex[i]) && wrong++ == 0)
        msg << who << " element " << i << ": got " << show(got[l.out_at + i]) << " expected " << show(ex[i]);
    if (wrong > 1) msg << " (" << wrong << " of " << ex.size() << " elements wrong)";
  } else if (!l.holds_input()) {
    // No output on this rank, and no input in the buffer: all of it must keep its poison.
    for (index_t i = 0; i < l.out_elems; ++i)
      if (!same_bits(got[i], poison) && wrong++ == 0)
        msg << who << " non-significant output element " << i << " was written";
    if (wrong > 1) msg << " (" << wrong << " of " << l.out_elems << " elements)";
  }
  if (!same_bits(got[l.alloc_elems], poison)) msg << (wrong ? "; " : "") << who << " wrote past the end of its output";
  return msg.str();
}

// One rank's device buffers for one call: the output buffer (with the element past its end) and,
// out of place, an input buffer of its own. Nothing here throws: a CUDA error is kept and returned
// by check(), so that a rank thread always reaches its barriers.
template <class T>
class call_buffers {
 public:
  call_buffers() = default;
  explicit call_buffers(const buffer_layout& l) : l_(l) {
    keep(cudaMalloc(&buf_, (l_.alloc_elems + 1) * sizeof(T)), "cudaMalloc (output)");
    if (!l_.holds_input()) keep(cudaMalloc(&own_in_, (l_.in_elems + 1) * sizeof(T)), "cudaMalloc (input)");
  }
  call_buffers(call_buffers&& o) noexcept { swap(o); }
  call_buffers& operator=(call_buffers&& o) noexcept {
    swap(o);
    return *this;
  }
  call_buffers(const call_buffers&) = delete;
  call_buffers& operator=(const call_buffers&) = delete;
  // Free only while no peer's kernel runs (cudaFree may wait for every kernel of the device).
  ~call_buffers() {
    if (own_in_) cudaFree(own_in_);
    if (buf_) cudaFree(buf_);
  }

  const buffer_layout& layout() const { return l_; }
  // The first CUDA error met by the constructor or prepare(), or "".
  const std::string& error() const { return error_; }
  T* input() const { return l_.holds_input() ? buf_ + l_.in_at : own_in_; }
  T* output() const { return buf_ + l_.out_at; }

  // Poisons the whole output buffer, then writes this rank's input (`in_elems` elements of x).
  // Synchronous with respect to the host.
  void prepare(const std::vector<T>& x) {
    if (!buf_) return;
    keep(cudaMemset(buf_, poison_byte, (l_.alloc_elems + 1) * sizeof(T)), "cudaMemset (poison)");
    if (!error_.empty()) return;
    keep(cudaMemcpy(input(), x.data(), l_.in_elems * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy (input)");
  }

  // Copies the output buffer back and checks it (check_output); "" when every element is right.
  std::string check(const std::optional<std::vector<T>>& expect, const std::string& who) const {
    if (!error_.empty()) return who + ": " + error_;
    std::vector<T> got(l_.alloc_elems + 1);
    const cudaError_t e = cudaMemcpy(got.data(), buf_, got.size() * sizeof(T), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return who + ": cudaMemcpy (output): " + cudaGetErrorString(e);
    return check_output(got, expect, l_, who);
  }

 private:
  void keep(cudaError_t e, const char* what) {
    if (e != cudaSuccess && error_.empty()) error_ = std::string(what) + ": " + cudaGetErrorString(e);
  }
  void swap(call_buffers& o) noexcept {
    std::swap(l_, o.l_);
    std::swap(buf_, o.buf_);
    std::swap(own_in_, o.own_in_);
    std::swap(error_, o.error_);
  }

  buffer_layout l_{};
  T* buf_ = nullptr;     // the output buffer (in place: the input too)
  T* own_in_ = nullptr;  // the input, out of place
  std::string error_;
};

}  // namespace collcomm_gpu_test
