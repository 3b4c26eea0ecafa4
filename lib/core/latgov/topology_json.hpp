// The stable JSON form of a Topology (`latgov topology --json`), schema
// "latgov.topology/1"; README.md documents every field.
#pragma once

#include "latgov/topology.hpp"

#include <nlohmann/json.hpp>

namespace latgov {

nlohmann::ordered_json to_json(const Topology& topology);

// A readable table: device, queue, type, IRQ, completion CPUs, submit CPUs.
std::string format_topology_table(const Topology& topology);

} // namespace latgov
