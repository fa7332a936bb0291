// collcomm/host/wait.hpp — the host executor's bounded waits and doorbells: detail/wait.hpp's,
// named in host::detail where the executor's code looks for them.
#pragma once

#include <collcomm/detail/wait.hpp>

COLLCOMM_NAMESPACE_BEGIN
namespace host {
namespace detail {
using collcomm::detail::cpu_relax;
using collcomm::detail::demote_line;
using collcomm::detail::doorbell;
using collcomm::detail::first_slice;
using collcomm::detail::max_slice;
using collcomm::detail::ring;
using collcomm::detail::sleep_on;
using collcomm::detail::spin_of;
using collcomm::detail::spin_policy;
using collcomm::detail::spin_polls;
using collcomm::detail::spin_yield_every;
using collcomm::detail::sys_atomic;
using collcomm::detail::wait_until;
using collcomm::detail::yield_polls;
}  // namespace detail
}  // namespace host
COLLCOMM_NAMESPACE_END
