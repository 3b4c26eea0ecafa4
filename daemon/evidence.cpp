#include "evidence.hpp"

#include "latgov/calibration_probe.hpp"
#include "latgov/evidence_file.hpp"

#include <algorithm>
#include <chrono>
#include <spdlog/spdlog.h>

namespace latgov {

EvidenceBook evidence_for(const SysRoot& root, const DaemonSettings& settings,
                          const Topology& topology, const Governor* current) {
    const MachineIdentity machine = read_machine_identity(root, topology);
    if (current && current->evidence().machine == machine)
        return current->evidence();
    const auto& path = settings.evidence_file;
    EvidenceBook fresh{machine, {}};
    // Nothing learnt yet; a file that cannot be checked (EACCES) is left to
    // load_evidence, which says why.
    if (std::error_code ec; !std::filesystem::exists(path, ec) && !ec)
        return fresh;
    auto loaded = load_evidence(path);
    if (!loaded) {
        spdlog::warn("Failed to load {}: {}; learning again", path.string(),
                     loaded.error().message);
        return fresh;
    }
    if (loaded->machine != machine) {
        spdlog::info("{} was learnt on another machine or kernel: learning again", path.string());
        return fresh;
    }
    spdlog::info("reusing what {} learnt at {} idle gaps", path.string(), loaded->gaps.size());
    return std::move(*loaded);
}

bool note_evidence_changes(Governor& governor) {
    governor.refresh_evidence(std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count(),
                              verdict_max_age);
    if (!governor.take_evidence_changed())
        return false;
    for (const auto& [cls, e] : governor.evidence().gaps)
        if (e.verdict != Verdict::uncertain)
            spdlog::info("learnt at gaps {} on {}: {} ({} window pairs, {} gained and {} lost, "
                         "wait gain {:+.1f}%, service gain {:+.1f}%{})",
                         gap_class_label(cls), e.device, to_string(e.verdict), e.gains.pairs,
                         e.gains.wait_above, e.gains.wait_below, 100 * e.gains.wait_mean(),
                         100 * e.gains.service_mean(),
                         e.inferred_from
                             ? "; carried over from gaps " + gap_class_label(*e.inferred_from)
                             : std::string{});
    return true;
}

void save_learnt_evidence(const EvidenceBook& book, const std::filesystem::path& file) {
    if (auto saved = save_evidence(file, book); !saved)
        spdlog::warn("{}; what was learnt is kept for this run, and written again with the next "
                     "change",
                     saved.error().message);
}

// Written at exit, not per pair: the file may live on a governed disk, and a
// write per pair would be IO in the middle of the measurement.
void save_unfinished_evidence(const Governor& governor, const DaemonSettings& settings) {
    const auto& gaps = governor.evidence().gaps;
    if (std::none_of(gaps.begin(), gaps.end(), [](const auto& g) {
            return g.second.verdict == Verdict::uncertain && g.second.gains.pairs > 0;
        }))
        return;
    if (auto saved = save_evidence(settings.evidence_file, governor.evidence()); !saved)
        spdlog::warn("{}", saved.error().message);
}

std::vector<std::uint64_t> window_counts(const Governor& governor) {
    std::vector<std::uint64_t> counts;
    for (const auto& d : governor.devices())
        counts.push_back(d.evidence.windows());
    return counts;
}

void log_finished_windows(const Governor& governor, const std::vector<std::uint64_t>& before) {
    const auto& devices = governor.devices();
    for (size_t i = 0; i < devices.size() && i < before.size(); ++i) {
        if (devices[i].evidence.windows() == before[i])
            continue;
        const IoWindow& w = devices[i].evidence.last_window();
        spdlog::debug("{} window: held {}, {:.1f} ms, {} IOs, cycle {:.1f} us, service {:.1f} "
                      "us, gap {:.1f} us",
                      devices[i].name, w.held, w.seconds * 1000, w.ios, w.cycle_us(),
                      w.service_us(), w.gap_us());
    }
}

} // namespace latgov
