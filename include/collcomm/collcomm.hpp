// collcomm/collcomm.hpp — the umbrella include.
#pragma once

#include <collcomm/algo/direct.hpp>
#include <collcomm/algo/linear.hpp>
#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/p2p.hpp>
#include <collcomm/algo/pairwise.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/ring.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/algo/two_shot.hpp>
#include <collcomm/compose.hpp>
#include <collcomm/error.hpp>
#include <collcomm/kinds.hpp>
#include <collcomm/ops.hpp>
#include <collcomm/protocol.hpp>
#include <collcomm/types.hpp>
