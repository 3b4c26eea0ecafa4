// What live IO taught about holding (the governor's EvidenceBook), kept in
// evidence_file across restarts on the same machine and kernel: loaded when
// a governed state is built, saved once no queue is active after a verdict
// changed and, with a change unsaved or experiments still unfinished, at
// exit.
#pragma once

#include "latgov/config.hpp"
#include "latgov/cost_model.hpp"
#include "latgov/governor.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

#include <cstdint>
#include <filesystem>
#include <vector>

namespace latgov {

// The evidence for a new governed state: what `current` learnt when it ran
// on the same machine and kernel (a rescan), else what evidence_file holds
// for this machine and kernel, else nothing.
EvidenceBook evidence_for(const SysRoot& root, const DaemonSettings& settings,
                          const Topology& topology, const Governor* current);

// Ages the verdicts; when one changed, logs what was learnt. True when it
// changed (the status shows it, and the file is to be saved).
bool note_evidence_changes(Governor& governor);

// Writes `book` to `file` (evidence_file), flushed: the caller does it
// while no queue is active, since the file may live on a governed disk (a
// write there in the middle of IO would be measured with it), and with
// the loop's lock released, so that an onset does not wait for the flush.
void save_learnt_evidence(const EvidenceBook& book, const std::filesystem::path& file);

// At exit: the window pairs of experiments still uncertain, so that short
// runs add up to a verdict over restarts.
void save_unfinished_evidence(const Governor& governor, const DaemonSettings& settings);

// Debug log of each live-IO window that finished during a tick: the window
// counts before the tick, then the log after it.
std::vector<std::uint64_t> window_counts(const Governor& governor);
void log_finished_windows(const Governor& governor, const std::vector<std::uint64_t>& before);

} // namespace latgov
