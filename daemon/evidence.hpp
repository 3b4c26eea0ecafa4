// What live IO taught about holding (the governor's EvidenceBook), kept in
// evidence_file across restarts on the same machine and kernel: loaded when
// a governed state is built, saved when a verdict changes and, with
// experiments still unfinished, at exit.
#pragma once

#include "latgov/config.hpp"
#include "latgov/cost_model.hpp"
#include "latgov/governor.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

#include <cstdint>
#include <vector>

namespace latgov {

// The evidence for a new governed state: what `current` learnt when it ran
// on the same machine and kernel (a rescan), else what evidence_file holds
// for this machine and kernel, else nothing.
EvidenceBook evidence_for(const SysRoot& root, const DaemonSettings& settings,
                          const Topology& topology, const Governor* current);

// Ages the verdicts; when one changed, logs what was learnt and writes the
// file. True when it changed (the status shows it).
bool save_evidence_if_changed(Governor& governor, const DaemonSettings& settings);

// At exit: the window pairs of experiments still uncertain, so that short
// runs add up to a verdict over restarts.
void save_unfinished_evidence(const Governor& governor, const DaemonSettings& settings);

// Debug log of each live-IO window that finished during a tick: the window
// counts before the tick, then the log after it.
std::vector<std::uint64_t> window_counts(const Governor& governor);
void log_finished_windows(const Governor& governor, const std::vector<std::uint64_t>& before);

} // namespace latgov
