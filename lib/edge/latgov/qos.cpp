#include "latgov/qos.hpp"

#include "latgov/replace_file.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <unistd.h>

namespace latgov {

bool at_least_as_strict(LatencyLimit a, LatencyLimit b) {
    if (!a)
        return !b;
    return !b || *a <= *b;
}

ResumeLatencyFile::ResumeLatencyFile(const SysRoot& root, int cpu)
    : path_(root.resolve("/sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                         "/power/pm_qos_resume_latency_us")
                .string()) {}

Result<LatencyLimit> ResumeLatencyFile::read() const {
    // On the onset path: plain syscalls, no stream set-up.
    Fd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    char buf[32];
    const ssize_t n = fd ? ::read(fd.get(), buf, sizeof buf) : -1;
    if (n < 0)
        return make_error("Failed to read " + path_ + ": " + errno_message(errno));
    if (n == 0)
        return make_error("Failed to read " + path_ + ": empty file");
    auto value = parse_resume_latency(std::string_view(buf, static_cast<size_t>(n)));
    if (!value)
        return make_error("Failed to parse " + path_ + ": " + value.error().message);
    return value;
}

Result<void> ResumeLatencyFile::write(LatencyLimit limit) const {
    const std::string text = format_resume_latency(limit);
    Fd fd(::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_TRUNC));
    if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        return make_error("Failed to write " + text + " to " + path_ + ": " + errno_message(errno));
    return {};
}

std::string format_journal(const std::vector<JournalEntry>& entries) {
    std::string out = "# latgov journal: per-CPU pm_qos_resume_latency_us to restore\n";
    for (const auto& e : entries)
        out += "cpu " + std::to_string(e.cpu) + " original " + format_resume_latency(e.original) +
               " written " + format_resume_latency(e.written) + "\n";
    return out;
}

Result<std::vector<JournalEntry>> parse_journal(std::string_view text) {
    std::vector<JournalEntry> entries;
    std::istringstream in{std::string(text)};
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        const auto content = trim(line);
        if (content.empty() || content.front() == '#')
            continue;
        std::istringstream fields(line);
        std::string cpu_key, cpu, original_key, original, written_key, written, extra;
        fields >> cpu_key >> cpu >> original_key >> original >> written_key >> written;
        const bool trailing = static_cast<bool>(fields >> extra);
        auto cpu_number = parse_u64(cpu);
        auto original_value = parse_resume_latency(original);
        auto written_value = parse_resume_latency(written);
        if (cpu_key != "cpu" || original_key != "original" || written_key != "written" ||
            trailing || !cpu_number ||
            *cpu_number > static_cast<std::uint64_t>(std::numeric_limits<int>::max()) ||
            !original_value || !written_value)
            return make_error("line " + std::to_string(number) +
                              ": expected \"cpu N original V "
                              "written V\", got \"" +
                              line + "\"");
        entries.push_back({static_cast<int>(*cpu_number), *original_value, *written_value});
    }
    return entries;
}

Result<std::vector<JournalEntry>> read_journal(const std::filesystem::path& path) {
    // No journal means nothing to restore (errno after a failed ifstream
    // open is not reliable enough to tell that apart from other errors).
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        if (!ec)
            return std::vector<JournalEntry>{};
        return make_error("Failed to open " + path.string() + ": " + ec.message());
    }
    std::ifstream in(path);
    if (!in)
        return make_error("Failed to open " + path.string() + ": " + errno_message(errno));
    std::stringstream text;
    text << in.rdbuf();
    auto entries = parse_journal(text.str());
    if (!entries)
        return make_error("Failed to parse " + path.string() + ": " + entries.error().message);
    return entries;
}

Result<void> write_journal(const std::filesystem::path& path,
                           const std::vector<JournalEntry>& entries) {
    std::error_code ec;
    if (entries.empty()) {
        std::filesystem::remove(path, ec);
        return {};
    }
    // PM QoS values do not survive a reboot either: no fsync (replace_file).
    return replace_file(path, format_journal(entries));
}

Result<void> restore_journal(const SysRoot& root, const std::filesystem::path& journal,
                             const LogSink& log) {
    auto entries = read_journal(journal);
    if (!entries)
        return entries.error();
    // Entries that could not be put back stay journaled for the next attempt.
    std::vector<JournalEntry> unrestored;
    for (const auto& e : *entries) {
        ResumeLatencyFile file(root, e.cpu);
        auto current = file.read();
        if (!current) {
            log(current.error().message + ", cannot restore cpu " + std::to_string(e.cpu));
            unrestored.push_back(e);
            continue;
        }
        if (*current != e.written) {
            log("cpu " + std::to_string(e.cpu) + ": value is " + format_resume_latency(*current) +
                ", not the " + format_resume_latency(e.written) +
                " latgov wrote; someone else set it, leaving it");
            continue;
        }
        if (auto written = file.write(e.original); !written) {
            log(written.error().message);
            unrestored.push_back(e);
        } else {
            log("cpu " + std::to_string(e.cpu) + ": restored " + format_resume_latency(e.original) +
                " from journal");
        }
    }
    if (auto saved = write_journal(journal, unrestored); !saved)
        return saved.error();
    if (!unrestored.empty())
        return make_error("Failed to restore " + std::to_string(unrestored.size()) +
                          " CPU(s), kept in " + journal.string());
    return {};
}

PerCpuHolder::PerCpuHolder(const SysRoot& root, std::filesystem::path journal, LogSink log)
    : root_(root), journal_(std::move(journal)), log_(std::move(log)) {}

bool PerCpuHolder::save_journal() {
    std::vector<JournalEntry> entries;
    for (const auto& [cpu, h] : held_)
        entries.push_back({cpu, h.original, h.written});
    if (auto saved = write_journal(journal_, entries); !saved) {
        log_(saved.error().message);
        return false;
    }
    return true;
}

bool PerCpuHolder::hold(int cpu, LatencyLimit want, SteadyTime now) {
    const std::string name = "cpu " + std::to_string(cpu);
    ResumeLatencyFile file(root_, cpu);
    auto current = file.read();
    if (!current) {
        log_(current.error().message + ", not constraining " + name);
        return false;
    }
    if (auto y = yielded_.find(cpu); y != yielded_.end()) {
        if (y->second == *current)
            return false;  // still theirs
        yielded_.erase(y); // changed again: what is there now is the original
    }
    std::optional<Held> previous;
    if (auto it = held_.find(cpu); it != held_.end()) {
        if (*current != it->second.written) {
            // Someone wrote the slot while we held it: do not fight. Their
            // value is the original from now on, and theirs to restore.
            log_(name + ": pm_qos_resume_latency_us changed to " + format_resume_latency(*current) +
                 " by someone else; leaving it");
            held_.erase(it);
            yielded_[cpu] = *current;
            save_journal();
            return false;
        }
        if (it->second.written == want)
            return true;
        if (at_least_as_strict(it->second.original, want)) {
            release(cpu); // the original already satisfies `want`: put it back
            return false;
        }
        previous = it->second;
    } else if (at_least_as_strict(*current, want)) {
        return false; // a stricter (or equal) value is already there: keep it
    }
    held_[cpu] =
        previous ? Held{previous->original, want, previous->since} : Held{*current, want, now};
    const auto undo = [&] {
        if (previous)
            held_[cpu] = *previous;
        else
            held_.erase(cpu);
    };
    // Journal first, so a crash right after the write can be undone; no
    // journal, no write.
    if (!save_journal()) {
        undo();
        return false;
    }
    if (auto written = file.write(want); !written) {
        log_(written.error().message);
        undo();
        save_journal();
        return false;
    }
    return true;
}

void PerCpuHolder::release(int cpu) {
    auto it = held_.find(cpu);
    if (it == held_.end())
        return;
    ResumeLatencyFile file(root_, cpu);
    auto current = file.read();
    if (current && *current == it->second.written) {
        if (auto written = file.write(it->second.original); !written)
            log_(written.error().message);
    } else if (current) {
        log_("cpu " + std::to_string(cpu) + ": pm_qos_resume_latency_us was changed to " +
             format_resume_latency(*current) + " by someone else; leaving it");
        yielded_[cpu] = *current; // as in hold(): theirs until they change it again
    } else {
        log_(current.error().message);
    }
    held_.erase(it);
    save_journal();
}

void PerCpuHolder::apply(const std::map<int, LatencyLimit>& wanted, SteadyTime now) {
    std::vector<int> to_release;
    for (const auto& [cpu, h] : held_)
        if (!wanted.count(cpu) || !wanted.at(cpu))
            to_release.push_back(cpu);
    for (int cpu : to_release)
        release(cpu);
    for (const auto& [cpu, limit] : wanted)
        if (limit)
            hold(cpu, limit, now);
}

void PerCpuHolder::release_all() {
    while (!held_.empty())
        release(held_.begin()->first);
}

GlobalHolder::GlobalHolder(const SysRoot& root, LogSink log) : root_(root), log_(std::move(log)) {}

void GlobalHolder::apply(LatencyLimit wanted, SteadyTime now) {
    if (!wanted) {
        fd_.reset();
        held_.reset();
        return;
    }
    if (fd_ && held_ == wanted)
        return;
    if (!fd_) {
        const auto path = root_.resolve("/dev/cpu_dma_latency");
        fd_ = Fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
        if (!fd_) {
            log_("Failed to open " + path.string() + ": " + errno_message(errno));
            return;
        }
        since_ = now;
    }
    // Exactly 4 bytes: the kernel takes them as a binary s32 (clamped, so a
    // huge limit means "none" rather than a negative, rejected value).
    const auto value = static_cast<std::int32_t>(
        std::min<std::uint32_t>(*wanted, static_cast<std::uint32_t>(cpu_dma_latency_none)));
    if (::write(fd_.get(), &value, sizeof value) != sizeof value) {
        log_("Failed to write /dev/cpu_dma_latency: " + errno_message(errno));
        fd_.reset();
        held_.reset();
        return;
    }
    held_ = wanted;
}

} // namespace latgov
