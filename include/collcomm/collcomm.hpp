// collcomm/collcomm.hpp — the umbrella include.
#pragma once

#include <collcomm/algo/ring.hpp>
#include <collcomm/compose.hpp>
#include <collcomm/error.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/types.hpp>
