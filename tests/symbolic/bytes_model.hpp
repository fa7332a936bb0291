// tests/symbolic/bytes_model.hpp — the known optimum (or the algorithm's stated figure) of bytes
// each rank moves, per algorithm and kind, in elements (sizeof 1). Keyed by the algorithm's name,
// so that this file needs no algorithm header and a new algorithm shows up as "no model yet".
//
// Slack: schedules cut their share into pieces rounded up to align_elems (channel_range, piece), so
// a rank can move up to `align` more elements than the ideal per piece it sends in a partial slice
// or channel. The slack allowed is (pieces a rank sends per slice) * align * channels, and only
// where a formula is a bound rather than an exact count; every figure below that can be exact is
// checked exactly (a ring's mean, reduce_scatter, all_gather, chains, direct reads).
#pragma once

#include "symbolic_executor.hpp"

#include <cmath>
#include <string>
#include <string_view>

namespace collcomm_symbolic {

struct bytes_expectation {
  bool known = false;
  std::string formula;    // for messages and the report
  double max_sent = -1;   // bound on the max over ranks of FIFO elements sent (-1: unchecked)
  double mean_sent = -1;  // exact mean over ranks (-1: unchecked)
  double max_peer = -1;   // bound on the max over ranks of elements read from peers
  double mean_peer = -1;  // exact mean over ranks
  double slack = 0;       // allowed over max_sent / max_peer
};

inline int log2_floor(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

// What algorithm `algo` should move for kind `kind` (names as in A::name, K::name).
inline bytes_expectation expected_bytes(std::string_view algo, std::string_view kind, const config& c) {
  bytes_expectation e;
  const double n = c.nranks, cnt = static_cast<double>(c.count);
  const double align = static_cast<double>(c.align_elems), ch = c.channels;
  const bool pow2 = (c.nranks & (c.nranks - 1)) == 0;
  auto set = [&](const char* f, double max_sent, double mean_sent, double max_peer, double mean_peer, double slack) {
    e.known = true;
    e.formula = f;
    e.max_sent = max_sent;
    e.mean_sent = mean_sent;
    e.max_peer = max_peer;
    e.mean_peer = mean_peer;
    e.slack = slack;
  };
  if (algo == "ring") {
    if (kind == "all_reduce")
      set("2(N-1)/N*count per rank", 2 * (n - 1) / n * cnt, 2 * (n - 1) / n * cnt, 0, 0, 2 * (n - 1) * align * ch);
    else if (kind == "reduce_scatter" || kind == "all_gather")
      set("(N-1)*count per rank", (n - 1) * cnt, (n - 1) * cnt, 0, 0, 0);
    else if (kind == "broadcast" || kind == "reduce")
      set("count on every rank of the chain but its end", n > 1 ? cnt : 0, (n - 1) / n * cnt, 0, 0, 0);
  } else if (algo == "tree") {
    if (kind == "all_reduce")
      // Each tree carries half: a rank sends its half up in both trees (count) and down to at most
      // two children in the tree where it is interior (count).
      set("<= 2*count per rank (double binary tree)", n > 1 ? 2 * cnt : 0, -1, 0, 0, 4 * align * ch + 4 * c.slot_elems);
    else if (kind == "broadcast")
      set("<= 2*count (two children), (N-1)*count in all", n > 1 ? 2 * cnt : 0, (n - 1) / n * cnt, 0, 0, 0);
    else if (kind == "reduce")
      set("count on every rank but the root", n > 1 ? cnt : 0, (n - 1) / n * cnt, 0, 0, 0);
  } else if (algo == "recursive_doubling") {
    const int m = 1 << log2_floor(c.nranks);
    if (kind == "all_reduce")
      set(pow2 ? "log2(N)*count per rank" : "<= (log2(m)+1)*count, m the largest power of two <= N",
          (log2_floor(c.nranks) + (pow2 ? 0 : 1)) * cnt, pow2 ? log2_floor(c.nranks) * cnt : -1, 0, 0, 0);
    else if (kind == "all_gather")
      set(pow2 ? "(N-1)*count per rank" : "<= (m-1)*count + (N-m)*count + (N-1)*count",
          pow2 ? (n - 1) * cnt : (m - 1 + (n - m) + n - 1) * cnt, pow2 ? (n - 1) * cnt : -1, 0, 0, 0);
    (void)m;
  } else if (algo == "one_shot") {
    if (kind == "all_reduce") set("peer reads (N-1)*count per rank", 0, 0, (n - 1) * cnt, (n - 1) * cnt, 0);
  } else if (algo == "two_shot") {
    if (kind == "all_reduce")
      set("peer reads 2(N-1)/N*count per rank", 0, 0, 2 * (n - 1) / n * cnt, 2 * (n - 1) / n * cnt,
          2 * (n - 1) * align * ch);
  } else if (algo == "direct") {
    if (kind == "reduce_scatter" || kind == "all_gather" || kind == "all_to_all")
      set("peer reads (N-1)*count per rank", 0, 0, (n - 1) * cnt, (n - 1) * cnt, 0);
  } else if (algo == "pairwise") {
    if (kind == "all_to_all") set("(N-1)*count per rank", (n - 1) * cnt, (n - 1) * cnt, 0, 0, 0);
  } else if (algo == "linear") {
    if (kind == "gather")
      set("count per non-root rank, 0 at the root", n > 1 ? cnt : 0, (n - 1) / n * cnt, 0, 0, 0);
    else if (kind == "scatter")
      set("(N-1)*count at the root, 0 elsewhere", (n - 1) * cnt, (n - 1) / n * cnt, 0, 0, 0);
  } else if (algo == "p2p") {
    if (kind == "send_recv") set("count per sending rank", cnt, -1, 0, 0, 0);
  }
  return e;
}

// "" when the report meets the expectation, else what is off.
inline std::string check_bytes(const bytes_expectation& e, const report& r) {
  auto fmt = [](double x) { return std::to_string(x); };
  const double eps = 1e-9;
  if (e.max_sent >= 0 && static_cast<double>(r.max_sent()) > e.max_sent + e.slack + eps)
    return "max sent " + fmt(static_cast<double>(r.max_sent())) + " > " + fmt(e.max_sent) + " + slack " + fmt(e.slack) +
           " (" + e.formula + ")";
  if (e.mean_sent >= 0 && std::fabs(r.mean_sent() - e.mean_sent) > 1e-6 * (1 + e.mean_sent))
    return "mean sent " + fmt(r.mean_sent()) + " != " + fmt(e.mean_sent) + " (" + e.formula + ")";
  if (e.max_peer >= 0 && static_cast<double>(r.max_peer_read()) > e.max_peer + e.slack + eps)
    return "max peer read " + fmt(static_cast<double>(r.max_peer_read())) + " > " + fmt(e.max_peer) + " + slack " +
           fmt(e.slack) + " (" + e.formula + ")";
  if (e.mean_peer >= 0 && std::fabs(r.mean_peer_read() - e.mean_peer) > 1e-6 * (1 + e.mean_peer))
    return "mean peer read " + fmt(r.mean_peer_read()) + " != " + fmt(e.mean_peer) + " (" + e.formula + ")";
  return "";
}

}  // namespace collcomm_symbolic
