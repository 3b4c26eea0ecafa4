// The runtime directory before latgovd or `latgovd --restore` uses it:
// locked, then cleared of what a killed latgov process left.
#pragma once

#include "latgov/config.hpp"
#include "latgov/result.hpp"
#include "latgov/runtime_dir.hpp"
#include "latgov/sysroot.hpp"

#include <chrono>

namespace latgov {

// Takes the runtime directory's lock, waiting up to `wait` while another
// process holds it (logged, and said in the service manager's STATUS=).
// SIGINT or SIGTERM meanwhile ends the wait (`stopped`); failures are logged.
enum class LockWait { locked, failed, stopped };
LockWait lock_runtime_dir(RuntimeDir& dir, std::chrono::seconds wait);

// In a locked runtime directory: puts back the per-CPU values the journal
// of a killed run records (restore_journal), then removes the temporaries
// that a latgov process killed between creating and renaming them left of
// the status and journal files and of `settings`' evidence, calibration
// and metrics files (how many is logged). The restore's failure, not
// logged here; the temporaries are removed either way.
Result<void> prepare_runtime_dir(const RuntimeDir& dir, const SysRoot& root,
                                 const DaemonSettings& settings);

// An error when the journal in `dir` records the CPUs of another root than
// `root` (check_journal_root): a run there can neither put it back nor
// take it over, so it would hold nothing. A journal that cannot be read is
// left to prepare_runtime_dir, which says why.
Result<void> check_journal_is_ours(const RuntimeDir& dir, const SysRoot& root);

} // namespace latgov
