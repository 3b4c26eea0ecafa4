#include "runtime_setup.hpp"

#include "latgov/qos.hpp"
#include "latgov/status.hpp"
#include "logging.hpp"

#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <time.h>

namespace latgov {

namespace {

// How often a wait for the lock tries it again.
constexpr timespec lock_poll_every{0, 100'000'000};

// A latgov process killed between creating a file's temporary and renaming
// it left the temporary behind; nothing else removes it. Those with this
// process's pid too: latgovd has no thread yet, and what it wrote so far
// (restore_journal) was renamed or removed before this.
std::size_t remove_dead_temporaries_of(const RuntimeDir& dir, const DaemonSettings& settings) {
    constexpr auto whose = TemporariesOf::dead_processes_and_this_one;
    std::size_t removed = remove_dead_temporaries_at(dir.fd(), status_file_name, whose) +
                          remove_dead_temporaries_at(dir.fd(), journal_file_name, whose);
    for (const auto& file :
         {settings.evidence_file, settings.calibration_file, settings.metrics_file})
        if (!file.empty())
            removed += remove_dead_temporaries(file, whose);
    return removed;
}

} // namespace

LockWait lock_runtime_dir(RuntimeDir& dir, std::chrono::seconds wait) {
    // Polled: flock() cannot wait for a lock and a signal at once. A reload
    // (SIGHUP) stays pending for the loop's signalfd, which reloads once
    // latgovd runs.
    const auto deadline = std::chrono::steady_clock::now() + wait;
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM); // blocked since main(), with SIGHUP
    for (bool said = false;;) {
        auto locked = dir.try_lock();
        if (!locked) {
            spdlog::error("{}", locked.error().message);
            return LockWait::failed;
        }
        if (*locked) {
            if (said) {
                spdlog::info("{} is ours now", dir.path().string());
                sd_notify(0, "STATUS=Starting");
            }
            return LockWait::locked;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            spdlog::error("{}{}", dir.busy_message(),
                          said ? fmt::format(" (waited {} s)", wait.count()) : std::string());
            return LockWait::failed;
        }
        if (!said) {
            const auto why =
                fmt::format("{}; waiting up to {} s for it", dir.busy_message(), wait.count());
            spdlog::warn("{}", why);
            sd_notifyf(0, "STATUS=%s", why.c_str());
            said = true;
        }
        if (const int sig = ::sigtimedwait(&stop, nullptr, &lock_poll_every); sig > 0) {
            spdlog::info("received {} while waiting for the lock, stopping", strsignal(sig));
            return LockWait::stopped;
        }
    }
}

Result<void> prepare_runtime_dir(const RuntimeDir& dir, const SysRoot& root,
                                 const DaemonSettings& settings) {
    auto journal = journal_in(dir);
    auto restored =
        journal ? restore_journal(root, *journal, log_warning) : Result<void>(journal.error());
    if (const std::size_t removed = remove_dead_temporaries_of(dir, settings); removed > 0)
        spdlog::info("removed {} temporary file(s) that a killed latgov process left", removed);
    return restored;
}

Result<void> check_journal_is_ours(const RuntimeDir& dir, const SysRoot& root) {
    auto journal = journal_in(dir);
    if (!journal)
        return journal.error();
    auto text = read_journal(*journal);
    if (!text)
        return {};
    return check_journal_root(*text, root, journal->path());
}

} // namespace latgov
