#include "latgov/qos.hpp"

#include "latgov/runtime_dir.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <fcntl.h>
#include <limits>
#include <linux/magic.h>
#include <optional>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

namespace latgov {

namespace {

// A write that returned fewer bytes than asked leaves errno as it was.
std::string short_write(ssize_t written, size_t wanted) {
    return "short write (" + std::to_string(written) + " of " + std::to_string(wanted) + " bytes)";
}

} // namespace

ResumeLatencyFile::ResumeLatencyFile(const SysRoot& root, int cpu)
    : root_(root),
      abs_("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/power/pm_qos_resume_latency_us"),
      path_(root.resolve(abs_).string()) {}

Result<void> ResumeLatencyFile::open_once(bool writable) {
    if (fd_ && !(writable && read_only_))
        return {};
    // A read-only descriptor is opened again for a write: what refused the
    // read-write open (a read-only mount, a security policy) may be gone.
    auto fd = root_.open(abs_, O_RDWR | O_CLOEXEC);
    bool read_only = false;
    if (!fd && (errno == EACCES || errno == EPERM || errno == EROFS)) {
        // Its errno is the cause of a write's failure: a write through a
        // read-only descriptor would only say EBADF.
        if (writable)
            return make_error(errno_message(errno));
        fd = root_.open(abs_, O_RDONLY | O_CLOEXEC); // enough to read
        read_only = true;
    }
    if (!fd)
        return fd.error();
    // A read-only descriptor reopened is closed only now, having pinned its
    // file while the new one was opened (see below).
    fd_ = std::move(*fd);
    read_only_ = read_only;
    struct statfs fs {};
    truncate_ = ::fstatfs(fd_.get(), &fs) == 0 && fs.f_type != SYSFS_MAGIC;
    // A file other than the one opened before belongs to a new device. The
    // descriptor kept open pins the old file, so the new one cannot have
    // taken its inode number; one closed after ENODEV may have, hence gone_.
    // A file not known to be new is taken for the old one: taken for new,
    // latgov's own value there would pass for the new device's original.
    struct stat st {};
    const bool known = ::fstat(fd_.get(), &st) == 0;
    if (opened_before_ && (gone_ || (known && (st.st_dev != dev_ || st.st_ino != ino_))))
        replaced_ = true;
    if (known) {
        opened_before_ = true;
        dev_ = st.st_dev;
        ino_ = st.st_ino;
    }
    gone_ = false;
    return {};
}

Result<LatencyLimit> ResumeLatencyFile::read() {
    char buf[32];
    ssize_t n = -1;
    int err = 0;
    // A CPU that was hot-removed and added back has a new file: reopen once.
    for (int attempt = 0; attempt < 2 && n < 0; ++attempt) {
        if (auto opened = open_once(); !opened)
            return opened.error();
        n = ::pread(fd_.get(), buf, sizeof buf, 0);
        err = errno;
        // A plain file (a test tree) that was removed still reads from its
        // old inode, where sysfs fails with ENODEV: its link count says so.
        struct stat st {};
        if (n >= 0 && truncate_ && ::fstat(fd_.get(), &st) == 0 && st.st_nlink == 0) {
            n = -1;
            err = ENODEV;
        }
        if (n < 0) {
            gone_ = gone_ || err == ENODEV;
            fd_.reset();
        }
    }
    if (n < 0)
        return make_error("Failed to read " + path_ + ": " + errno_message(err));
    if (n == 0)
        return make_error("Failed to read " + path_ + ": empty file");
    auto value = parse_resume_latency(std::string_view(buf, static_cast<size_t>(n)));
    if (!value)
        return make_error("Failed to parse " + path_ + ": " + value.error().message);
    return value;
}

Result<void> ResumeLatencyFile::write(LatencyLimit limit) {
    const std::string text = format_resume_latency(limit);
    if (auto opened = open_once(true); !opened)
        return make_error("Failed to write " + text + " to " + path_ + ": " +
                          opened.error().message);
    // sysfs takes the whole value from one write at offset 0; a plain file
    // (a test tree) is cut to it as well.
    const ssize_t n = ::pwrite(fd_.get(), text.data(), text.size(), 0);
    int err = n < 0 ? errno : 0;
    if (n == static_cast<ssize_t>(text.size()) && truncate_ &&
        ::ftruncate(fd_.get(), static_cast<off_t>(text.size())) != 0)
        err = errno;
    if (n == static_cast<ssize_t>(text.size()) && err == 0)
        return {};
    gone_ = gone_ || err == ENODEV;
    fd_.reset();
    return make_error("Failed to write " + text + " to " + path_ + ": " +
                      (n >= 0 && n < static_cast<ssize_t>(text.size()) ? short_write(n, text.size())
                                                                       : errno_message(err)));
}

JournalPlace::JournalPlace(std::filesystem::path path) : path_(std::move(path)) {}

Result<JournalPlace> JournalPlace::in_directory(int dir_fd, std::filesystem::path path) {
    Fd dir(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
    if (!dir)
        return make_error("Failed to keep " + path.parent_path().string() +
                          " open: " + errno_message(errno));
    JournalPlace place(std::move(path));
    place.dir_ = std::make_shared<const Fd>(std::move(dir));
    return place;
}

int JournalPlace::dir() const {
    return dir_ ? dir_->get() : AT_FDCWD;
}

std::string JournalPlace::relative() const {
    return dir_ ? path_.filename().string() : path_.string();
}

Result<std::optional<std::string>> JournalPlace::read(size_t max_bytes) const {
    if (!dir_)
        return read_file_nofollow(path_, max_bytes);
    return read_file_at(dir(), path_.parent_path().string(), relative(), max_bytes);
}

Result<void> JournalPlace::write_atomic(std::string_view text, mode_t mode) const {
    if (!dir_)
        return write_file_atomic(path_, text, mode);
    return write_file_atomic_at(dir(), path_.parent_path().string(), relative(), text, mode);
}

Result<Fd> JournalPlace::open_read_write() const {
    Fd fd(::openat(dir(), relative().c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
    if (!fd)
        return make_error("Failed to open " + path_.string() + ": " + errno_message(errno));
    return fd;
}

Result<bool> JournalPlace::exists() const {
    struct stat st {};
    if (::fstatat(dir(), relative().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
        return true;
    if (errno == ENOENT || errno == ENOTDIR) // ENOTDIR: a path whose directory is a file
        return false;
    return make_error("Failed to look at " + path_.string() + ": " + errno_message(errno));
}

Result<void> JournalPlace::remove() const {
    if (::unlinkat(dir(), relative().c_str(), 0) != 0 && errno != ENOENT)
        return make_error("Failed to remove " + path_.string() + ": " + errno_message(errno));
    return {};
}

Result<JournalPlace> journal_in(const RuntimeDir& dir) {
    return JournalPlace::in_directory(dir.fd(), dir.path() / journal_file_name);
}

Result<JournalText> read_journal(const JournalPlace& journal) {
    auto text = journal.read(max_journal_bytes);
    if (!text)
        return text.error();
    if (!*text)
        return JournalText{};
    return parse_journal(**text);
}

Result<void> write_journal(const JournalPlace& journal, const std::vector<JournalEntry>& entries,
                           const std::vector<std::string>& kept_lines,
                           const JournalOrigin& origin) {
    if (entries.empty() && kept_lines.empty())
        return journal.remove();
    return journal.write_atomic(format_journal(entries, kept_lines, origin), 0600);
}

std::string boot_id_of(const SysRoot& root) {
    auto text = root.read("/proc/sys/kernel/random/boot_id");
    return text ? std::string(trim(*text)) : std::string();
}

std::string journal_root_of(const SysRoot& root) {
    std::error_code ec;
    auto path = std::filesystem::absolute(root.root(), ec);
    if (ec)
        return root.root().lexically_normal().string();
    auto resolved = std::filesystem::weakly_canonical(path, ec);
    return (ec ? path.lexically_normal() : resolved).string();
}

JournalOrigin journal_origin_of(const SysRoot& root) {
    return {boot_id_of(root), journal_root_of(root)};
}

namespace {

// `word` as one word of a shell command: quoted when it holds anything but
// the characters paths are usually made of.
std::string shell_word(const std::string& word) {
    const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) ||
               std::string_view("/._+-:@,=").find(c) != std::string_view::npos;
    });
    if (plain)
        return word;
    std::string out = "'";
    for (const char c : word)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

} // namespace

Result<void> check_journal_root(const JournalText& text, const SysRoot& root,
                                const std::filesystem::path& journal) {
    const std::string ours = journal_root_of(root);
    if (text.root.empty() || text.root == ours)
        return {};
    auto of = [](const std::string& r) {
        return r == "/" ? std::string("the live system (/)") : "the tree " + r;
    };
    std::error_code ec;
    const auto dir = std::filesystem::absolute(journal.parent_path(), ec);
    std::string restore = "latgovd --restore";
    if (text.root != "/")
        restore += " --sysroot " + shell_word(text.root);
    restore += " --runtime-dir " + shell_word((ec ? journal.parent_path() : dir).string());
    return make_error(journal.string() + " records the CPUs of " + of(text.root) + ", not of " +
                      of(ours) + ": nothing of it is put back or taken over here, and it is " +
                      "kept for `" + restore + "`" +
                      (text.root == "/" ? ""
                                        : " (if that tree is gone, so are its CPUs: remove the "
                                          "journal)"));
}

namespace {

// Whether `text` was written during another boot than `boot_id`; logged.
// Unknown either way (a journal of an older latgov, a tree without the
// file) is this boot's: its records are put back as ever.
bool of_earlier_boot(const JournalText& text, const std::string& boot_id,
                     const std::filesystem::path& journal, const LogSink& log) {
    if (text.boot_id.empty() || boot_id.empty() || text.boot_id == boot_id)
        return false;
    log(journal.string() + " was written during an earlier boot (" + text.boot_id +
        "): what it records went with that boot, nothing of it is put back");
    return true;
}

} // namespace

namespace {

// A CPU hot-removed (not just offline, which keeps its directory): the
// kernel dropped its PM QoS request with the device, so there is nothing
// to put back, now or ever. Only ENOENT says so: a directory that cannot be
// looked at now (EACCES, EIO) keeps its record. And only where the CPUs'
// directory is there: without it (a wrong --sysroot, /sys not mounted) no
// CPU is known to be gone.
bool cpu_removed(const SysRoot& root, int cpu) {
    if (!root.open("/sys/devices/system/cpu", O_PATH | O_DIRECTORY | O_CLOEXEC))
        return false;
    auto dir = root.open("/sys/devices/system/cpu/cpu" + std::to_string(cpu),
                         O_PATH | O_DIRECTORY | O_CLOEXEC);
    return !dir && errno == ENOENT;
}

} // namespace

Result<void> restore_journal(const SysRoot& root, const JournalPlace& journal, const LogSink& log) {
    auto text = read_journal(journal);
    if (!text)
        return text.error();
    if (auto ours = check_journal_root(*text, root, journal.path()); !ours)
        return ours.error();
    const JournalOrigin origin = journal_origin_of(root);
    if (of_earlier_boot(*text, origin.boot_id, journal.path(), log))
        return write_journal(journal, {}); // removes it
    if (text->entries.empty() && text->bad_lines.empty()) {
        if (auto removed = write_journal(journal, {}); !removed) // a journal of blank records
            return removed.error();
        return {};
    }
    for (const auto& error : text->errors)
        log("Failed to parse " + journal.path().string() + ": " + error + ", keeping that line");
    // Entries that could not be put back stay journaled for the next attempt.
    std::vector<JournalEntry> unrestored;
    for (const auto& e : text->entries) {
        if (e.released)
            continue; // latgov did not hold it: whatever is there is not its own
        const std::string name = "cpu " + std::to_string(e.cpu);
        ResumeLatencyFile file(root, e.cpu);
        auto current = file.read();
        if (!current && cpu_removed(root, e.cpu)) {
            log(name + " no longer exists; its constraint went with it");
            continue;
        }
        if (!current) {
            log(current.error().message + ", cannot restore " + name);
            unrestored.push_back(e);
            continue;
        }
        const auto action = restore_action(e, *current);
        if (action == RestoreAction::none)
            continue;
        if (action == RestoreAction::leave_theirs) {
            log(name + ": value is " + format_resume_latency(*current) +
                ", not one latgov wrote; someone else set it, leaving it");
            continue;
        }
        if (auto written = file.write(e.original); !written) {
            log(written.error().message);
            unrestored.push_back(e);
        } else {
            log(name + ": restored " + format_resume_latency(e.original) + " from journal");
        }
    }
    if (auto saved = write_journal(journal, unrestored, text->bad_lines, origin); !saved)
        return saved.error();
    if (unrestored.empty() && text->bad_lines.empty())
        return {};
    // Only what failed, and which CPUs: each one's cause is logged above.
    std::string failed;
    if (!unrestored.empty()) {
        CpuSet cpus;
        for (const auto& e : unrestored)
            cpus.push_back(e.cpu);
        std::sort(cpus.begin(), cpus.end());
        cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
        failed = "Failed to restore " + std::string(cpus.size() == 1 ? "cpu " : "cpus ") +
                 format_cpu_list(cpus);
    }
    if (!text->bad_lines.empty())
        failed += (failed.empty() ? "Failed to parse " : " and to parse ") +
                  std::to_string(text->bad_lines.size()) +
                  (text->bad_lines.size() == 1 ? " line" : " lines");
    return make_error(failed + ", kept in " + journal.path().string() +
                      (text->errors.empty() ? "" : " (" + text->errors.front() + ")"));
}

PerCpuHolder::PerCpuHolder(const SysRoot& root, JournalPlace journal, LogSink log, bool take_over)
    : root_(root), journal_(std::move(journal)), log_(std::move(log)),
      origin_(journal_origin_of(root_)), adopted_(!take_over) {}

ResumeLatencyFile& PerCpuHolder::file(int cpu) {
    auto it = files_.find(cpu);
    if (it == files_.end())
        it = files_.emplace(cpu, ResumeLatencyFile(root_, cpu)).first;
    return it->second;
}

std::vector<int> PerCpuHolder::tightened_since(std::uint64_t mark) const {
    std::vector<int> cpus;
    if (writes_ == mark)
        return cpus; // nothing written: nothing to compare
    for (const auto& [cpu, held] : held_)
        if (held.write > mark && stricter(held.written, held.replaced))
            cpus.push_back(cpu);
    return cpus;
}

Result<LatencyLimit> PerCpuHolder::read(int cpu, bool* replugged) {
    auto& slot = file(cpu);
    auto current = slot.read();
    const bool renewed = current && slot.take_replaced();
    if (renewed)
        forget_device(cpu, *current);
    if (replugged)
        *replugged = renewed;
    return current;
}

// The kernel dropped every request on the CPU's old device with it, latgov's
// and anyone else's, and the new device starts with no constraint: its value
// is not someone else's change but the original of the next hold.
void PerCpuHolder::forget_device(int cpu, LatencyLimit current) {
    log_("cpu " + std::to_string(cpu) + " was removed and added back; " +
         "what was set on it went with the old device, and its value now, " +
         format_resume_latency(current) + ", is its original");
    held_.erase(cpu);
    yielded_.erase(cpu);
    auto record = records_.find(cpu);
    if (record == records_.end())
        return;
    // The record names the old device's original, which nobody set on the
    // new one: a restore must not put it there. It is kept only if the new
    // value is that original anyway; then the file holds its original, as
    // after a release, and the record is the journal of the next hold. It
    // counts as put back either way, so that if it cannot be cleared now
    // retry_restores() leaves the new value alone and check_records()
    // clears it later.
    if (current != record->second.entry.original) {
        record->second.restored = true;
        forget(cpu);
    } else {
        mark_released(cpu, record->second);
    }
}

void PerCpuHolder::mark_released(int cpu, Record& record) {
    record.restored = true;
    if (record.entry.released)
        return;
    JournalEntry entry = record.entry;
    entry.released = true;
    if (auto marked = write_slot(record.slot, format_journal_entry(entry)); !marked) {
        // check_records() tries again, and meanwhile drops the record once
        // someone else's value is there.
        log_("cpu " + std::to_string(cpu) + ": failed to mark its journal record released (" +
             marked.error().message + ")");
        return;
    }
    record.entry = std::move(entry);
}

// Takes over what an earlier run left (entries a restore could not put back,
// lines it could not parse): they stay journaled until put back. Nothing
// changes in the holder unless the journal is open at the end.
Result<void> PerCpuHolder::open_journal() {
    if (journal_fd_)
        return {};
    auto old = read_journal(journal_);
    if (!old)
        return old.error();
    if (auto ours = check_journal_root(*old, root_, journal_.path()); !ours)
        return ours.error();
    if (of_earlier_boot(*old, origin_.boot_id, journal_.path(), log_))
        *old = JournalText{};
    std::string prefix = journal_header_for(origin_);
    for (const auto& line : old->bad_lines)
        prefix += line + "\n";
    prefix.insert(prefix.size() - 1,
                  (journal_record_size - prefix.size() % journal_record_size) % journal_record_size,
                  ' ');
    std::string text = prefix;
    std::map<int, Record> records;
    size_t slots = 0;
    for (auto& e : old->entries) {
        if (records.count(e.cpu))
            continue; // a duplicate: the first one wins
        text += padded_record(format_journal_entry(e));
        records[e.cpu] = Record{e, slots++, e.released};
    }
    if (auto written = journal_.write_atomic(text, 0600); !written)
        return written.error();
    auto fd = journal_.open_read_write();
    if (!fd)
        return fd.error();
    journal_fd_ = std::move(*fd);
    kept_lines_ = std::move(old->bad_lines);
    first_slot_offset_ = prefix.size();
    records_ = std::move(records);
    next_slot_ = slots;
    free_slots_.clear();
    return {};
}

Result<void> PerCpuHolder::write_slot(size_t slot, const std::string& line) {
    step("record");
    const std::string record = padded_record(line);
    const auto offset = static_cast<off_t>(first_slot_offset_ + slot * journal_record_size);
    const ssize_t n = ::pwrite(journal_fd_.get(), record.data(), record.size(), offset);
    if (n < 0)
        return make_error("Failed to write " + journal_.path().string() + ": " +
                          errno_message(errno));
    if (n != static_cast<ssize_t>(record.size()))
        return make_error("Failed to write " + journal_.path().string() + ": " +
                          short_write(n, record.size()));
    return {};
}

bool PerCpuHolder::journal(const JournalEntry& held, bool restored) {
    JournalEntry entry = held;
    entry.released = restored;
    if (!adopted_)
        return false; // adopt_journal() said why
    if (auto opened = open_journal(); !opened) {
        hold_failed(entry.cpu,
                    opened.error().message + ", not constraining cpu " + std::to_string(entry.cpu));
        return false;
    }
    auto it = records_.find(entry.cpu);
    size_t slot = 0;
    if (it != records_.end()) {
        slot = it->second.slot;
    } else if (!free_slots_.empty()) {
        slot = free_slots_.back();
    } else {
        slot = next_slot_;
    }
    if (auto written = write_slot(slot, format_journal_entry(entry)); !written) {
        // A failed pwrite on tmpfs (ENOSPC) writes nothing: the record is as before.
        hold_failed(entry.cpu, written.error().message + ", not constraining cpu " +
                                   std::to_string(entry.cpu));
        return false;
    }
    if (it != records_.end()) {
        it->second.entry = entry;
        it->second.restored = restored;
    } else {
        if (!free_slots_.empty() && free_slots_.back() == slot)
            free_slots_.pop_back();
        else
            ++next_slot_;
        records_[entry.cpu] = Record{entry, slot, restored};
    }
    return true;
}

bool PerCpuHolder::forget(int cpu) {
    auto it = records_.find(cpu);
    if (it == records_.end())
        return true;
    if (auto cleared = write_slot(it->second.slot, ""); !cleared) {
        log_("cpu " + std::to_string(cpu) + ": failed to clear its journal record (" +
             cleared.error().message + "); the record stays, and a later restore puts its " +
             "original back only if the CPU then holds a value latgovd wrote");
        return false; // stays: the value there is not one it names
    }
    free_slots_.push_back(it->second.slot);
    records_.erase(it);
    return true;
}

// An earlier run's records (a restore that could not put a CPU back) must be
// known before the first decision: a value it left would otherwise be taken
// for the original, and its record overwritten. So until the journal is
// taken over (or known not to exist) nothing is held or journaled, and each
// apply(), prepare() and check_records() tries again.
bool PerCpuHolder::adopt_journal() {
    if (adopted_)
        return true;
    std::string failed;
    if (journal_fd_) {
        adopted_ = true;
    } else if (auto exists = journal_.exists(); !exists) {
        failed = exists.error().message;
    } else if (!*exists) {
        adopted_ = true; // nothing left by an earlier run
    } else if (auto opened = open_journal(); opened) {
        adopted_ = true;
    } else {
        failed = opened.error().message;
    }
    if (adopted_) {
        if (!adopt_error_.empty())
            log_("Took over " + journal_.path().string() + "; constraining CPUs again");
        adopt_error_.clear();
        return true;
    }
    if (failed != adopt_error_) // once, not at every tick
        log_(failed + "; what an earlier run left there is not taken over yet, " +
             "and no CPU is constrained until it is (tried again at every tick)");
    adopt_error_ = failed;
    return false;
}

bool PerCpuHolder::drop_if_theirs(int cpu, LatencyLimit current) {
    auto record = records_.find(cpu);
    if (record == records_.end() || !record->second.restored || held_.count(cpu) ||
        current == record->second.entry.original)
        return false;
    const auto original = record->second.entry.original;
    if (!forget(cpu))
        return false; // logged; tried again at the next look
    log_("cpu " + std::to_string(cpu) + ": pm_qos_resume_latency_us changed to " +
         format_resume_latency(current) + " by someone else while latgov did not hold it; " +
         "its journal record is dropped, so that no restore puts " +
         format_resume_latency(original) + " back over it");
    return true;
}

void PerCpuHolder::check_records() {
    // A release that failed is tried again here too: apply() does only when
    // the holds change, which an idle machine may not do for hours.
    if (!adopt_journal())
        return;
    retry_restores();
    std::vector<int> cpus;
    for (const auto& [cpu, record] : records_)
        if (record.restored && !held_.count(cpu))
            cpus.push_back(cpu);
    for (int cpu : cpus)
        if (auto current = read(cpu); current && !drop_if_theirs(cpu, *current))
            if (auto record = records_.find(cpu); record != records_.end())
                mark_released(cpu, record->second); // where that failed before
}

void PerCpuHolder::hold_failed(int cpu, const std::string& why) {
    // The first failure only: the text of the next may differ in nothing
    // that matters (a temporary file's name).
    if (hold_failing_.insert(cpu).second)
        log_(why);
}

void PerCpuHolder::hold_succeeded(int cpu) {
    if (hold_failing_.erase(cpu) > 0)
        log_("cpu " + std::to_string(cpu) + ": constrained now; what failed before has passed");
}

bool PerCpuHolder::hold(int cpu, LatencyLimit want, TimePoint now) {
    const std::string name = "cpu " + std::to_string(cpu);
    auto& slot = file(cpu);
    auto current = read(cpu);
    if (!current) {
        hold_failed(cpu, current.error().message + ", not constraining " + name);
        return false;
    }
    if (auto y = yielded_.find(cpu); y != yielded_.end()) {
        if (y->second == *current)
            return false;  // still theirs
        yielded_.erase(y); // changed again: what is there now is the original
    }
    drop_if_theirs(cpu, *current);
    auto record = records_.find(cpu);
    std::optional<Held> previous;
    LatencyLimit original = *current;
    if (auto it = held_.find(cpu); it != held_.end()) {
        if (*current != it->second.written) {
            // Someone wrote the slot while we held it: do not fight. Their
            // value is the original from now on, and theirs to restore.
            log_(name + ": pm_qos_resume_latency_us changed to " + format_resume_latency(*current) +
                 " by someone else; leaving it");
            held_.erase(it);
            yielded_[cpu] = *current;
            forget(cpu);
            return false;
        }
        if (it->second.written == want)
            return true;
        if (at_least_as_strict(it->second.original, want)) {
            release(cpu); // the original already satisfies `want`: put it back
            return false;
        }
        previous = it->second;
        original = previous->original;
    } else if (record != records_.end() && !record->second.restored &&
               *current != record->second.entry.original &&
               record->second.entry.latgov_may_have_written(*current)) {
        // A value an earlier run (or a failed release) left: the journaled
        // original is still the one to put back.
        original = record->second.entry.original;
        if (at_least_as_strict(original, want))
            return false; // retry_restores() puts the original back
    } else if (at_least_as_strict(*current, want)) {
        return false; // a stricter (or equal) value is already there: keep it
    }
    // Journal first, so that whatever a kill interrupts, the file holds the
    // original or a value the record names, and the record says held; no
    // journal, no write. A record written ahead (prepare(), or kept from
    // the last release) is marked held here: one write to tmpfs at an
    // onset.
    JournalEntry entry{cpu, original, want, {}};
    if (*current != original && *current != want)
        entry.earlier.push_back(*current);
    const bool covered =
        record != records_.end() && !record->second.entry.released &&
        record->second.entry.original == original &&
        record->second.entry.latgov_may_have_written(want) &&
        (*current == original || record->second.entry.latgov_may_have_written(*current));
    if (!covered && !journal(entry, false))
        return false;
    step("journaled");
    if (auto written = slot.write(want); !written) {
        // The record names both the old and the new value: whichever the
        // file holds, a restore puts the original back.
        hold_failed(cpu, written.error().message);
        records_[cpu].restored = false;
        return false;
    }
    hold_succeeded(cpu);
    auto& journaled = records_[cpu];
    journaled.restored = false;
    held_[cpu] = Held{original, want, previous ? previous->since : now, *current, ++writes_};
    step("written");
    // The record named the value replaced too, for a write that might not
    // land. It landed: narrowed to what the file holds, or someone else's
    // later write of the replaced value would be taken for latgovd's by
    // the restore after a kill, and their value lost.
    if (journal_fd_ && (!journaled.entry.earlier.empty() || journaled.entry.written != want)) {
        const JournalEntry exact{cpu, original, want, {}};
        if (auto narrowed = write_slot(journaled.slot, format_journal_entry(exact)); narrowed)
            journaled.entry = exact;
        else
            log_(narrowed.error().message + "; the record of " + name +
                 " still names the value it replaced");
    }
    return true;
}

void PerCpuHolder::release(int cpu) {
    auto it = held_.find(cpu);
    if (it == held_.end())
        return;
    const Held held = it->second;
    held_.erase(it);
    auto& slot = file(cpu);
    bool replugged = false;
    auto current = read(cpu, &replugged);
    if (replugged)
        return; // nothing to put back: the limit went with the old device
    if (current && *current == held.written) {
        if (auto written = slot.write(held.original); !written) {
            log_(written.error().message + "; kept in the journal, retried later");
            return;
        }
        step("released");
        // The record stays, released: it is already the journal of the next hold.
        if (auto r = records_.find(cpu); r != records_.end())
            mark_released(cpu, r->second);
    } else if (current) {
        log_("cpu " + std::to_string(cpu) + ": pm_qos_resume_latency_us was changed to " +
             format_resume_latency(*current) + " by someone else; leaving it");
        // as in hold(): theirs until they change it again; no limit is
        // nobody's once latgov no longer wants the CPU, as now
        if (*current)
            yielded_[cpu] = *current;
        forget(cpu);
    } else {
        log_(current.error().message + "; kept in the journal, retried later");
    }
}

void PerCpuHolder::retry_restores() {
    for (auto it = records_.begin(); it != records_.end();) {
        const int cpu = it->first;
        auto& record = it->second;
        ++it; // forget() may erase the record
        if (record.restored || held_.count(cpu))
            continue;
        auto& slot = file(cpu);
        bool replugged = false;
        auto current = read(cpu, &replugged);
        if (replugged)
            continue; // settled by forget_device(), which may have dropped the record
        if (!current && cpu_removed(root_, cpu)) {
            log_("cpu " + std::to_string(cpu) + " no longer exists; its constraint went with it");
            forget(cpu);
            yielded_.erase(cpu); // and so did anyone else's
            files_.erase(cpu);
            continue;
        }
        if (!current)
            continue;
        if (*current == record.entry.original) {
            mark_released(cpu, record);
        } else if (!record.entry.latgov_may_have_written(*current)) {
            forget(cpu); // someone else's value now
        } else if (auto written = slot.write(record.entry.original); written) {
            log_("cpu " + std::to_string(cpu) + ": restored " +
                 format_resume_latency(record.entry.original));
            mark_released(cpu, record);
        }
    }
}

void PerCpuHolder::apply(const std::map<int, LatencyLimit>& wanted, TimePoint now) {
    const bool adopted = adopt_journal();
    auto unwanted = [&](int cpu) { return !wanted.count(cpu) || !wanted.at(cpu); };
    // Someone lifted latgov's limit while it held the CPU (tuned restoring
    // its "0", say): not fought while latgov wants the CPU, but once it no
    // longer does nobody holds anything there, and the next hold takes it
    // as at any start.
    std::erase_if(yielded_, [&](const auto& y) { return !y.second && unwanted(y.first); });
    // A failure is said once per hold wanted, not once for good.
    std::erase_if(hold_failing_, [&](int cpu) { return unwanted(cpu); });
    std::vector<int> to_release;
    for (const auto& [cpu, h] : held_)
        if (unwanted(cpu))
            to_release.push_back(cpu);
    for (int cpu : to_release)
        release(cpu);
    if (!adopted)
        return; // logged; nothing held yet, nothing to put back of its own
    for (const auto& [cpu, limit] : wanted)
        if (limit)
            hold(cpu, limit, now);
    if (std::any_of(records_.begin(), records_.end(),
                    [&](const auto& r) { return !r.second.restored && !held_.count(r.first); }))
        retry_restores();
}

void PerCpuHolder::prepare(const std::map<int, LatencyLimit>& likely) {
    if (!adopt_journal())
        return; // logged
    check_records();
    for (const auto& [cpu, limit] : likely) {
        if (!limit || held_.count(cpu))
            continue;
        auto current = read(cpu);
        if (!current || at_least_as_strict(*current, limit))
            continue;
        if (auto y = yielded_.find(cpu); y != yielded_.end() && y->second == *current)
            continue;
        auto record = records_.find(cpu);
        if (record != records_.end() &&
            (!record->second.restored || (record->second.entry.original == *current &&
                                          record->second.entry.latgov_may_have_written(limit))))
            continue; // already journaled, or not put back yet
        journal(JournalEntry{cpu, *current, limit, {}}, true);
    }
}

// An earlier run's journal this one has not taken over, and so has not put
// back: the CPUs it records may hold that run's values still, unless it is
// another tree's or an earlier boot's, or every record of it says released.
// One that cannot be read may be this tree's.
bool PerCpuHolder::earlier_journal_left() const {
    if (adopted_)
        return false;
    auto text = read_journal(journal_);
    if (!text)
        return true;
    const bool this_boot =
        text->boot_id.empty() || origin_.boot_id.empty() || text->boot_id == origin_.boot_id;
    const bool holds = std::any_of(text->entries.begin(), text->entries.end(),
                                   [](const JournalEntry& e) { return !e.released; });
    return this_boot && holds && check_journal_root(*text, root_, journal_.path());
}

bool PerCpuHolder::release_all() {
    while (!held_.empty())
        release(held_.begin()->first);
    if (earlier_journal_left()) {
        log_(journal_.path().string() + ", left by an earlier run, is not taken over" +
             (adopt_error_.empty() ? std::string() : " (" + adopt_error_ + ")") +
             ": the CPUs it records may still be constrained, and `latgovd --restore` puts "
             "them back");
        return false;
    }
    retry_restores();
    const bool all_restored = std::all_of(records_.begin(), records_.end(),
                                          [](const auto& r) { return r.second.restored; });
    if (!all_restored || !kept_lines_.empty()) {
        // The journal stays, but only with what is left: the record of a CPU
        // that holds its original again still names latgov's value, and a
        // restore long after would put the original back over the same
        // value written by someone else.
        std::vector<int> restored;
        for (const auto& [cpu, record] : records_)
            if (record.restored)
                restored.push_back(cpu);
        for (int cpu : restored)
            forget(cpu); // logged if it fails
        if (!all_restored)
            log_("Failed to put back every original; " + journal_.path().string() +
                 " keeps what is left for `latgovd --restore`");
        else // every value of its own back; the lines are an earlier run's
            log_(journal_.path().string() + " keeps " + std::to_string(kept_lines_.size()) +
                 " line(s) it cannot read, left by an earlier run; every value this one "
                 "wrote is put back");
        return all_restored;
    }
    if (journal_fd_) {
        journal_fd_.reset();
        if (auto removed = journal_.remove(); !removed)
            log_(removed.error().message);
    }
    records_.clear();
    free_slots_.clear();
    next_slot_ = 0;
    return true;
}

GlobalHolder::GlobalHolder(const SysRoot& root, LogSink log) : root_(root), log_(std::move(log)) {}

void GlobalHolder::apply(LatencyLimit wanted, TimePoint now) {
    if (!wanted) {
        fd_.reset();
        held_.reset();
        failing_ = false; // a failure is said once per hold wanted
        return;
    }
    if (fd_ && held_ == wanted)
        return;
    if (!fd_) {
        auto fd = root_.open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
        if (!fd) {
            failed(fd.error().message);
            return;
        }
        fd_ = std::move(*fd);
        since_ = now;
    }
    // Exactly 4 bytes: the kernel takes them as a binary s32 (clamped, so a
    // huge limit means "none" rather than a negative, rejected value).
    const auto value = static_cast<std::int32_t>(
        std::min<std::uint32_t>(*wanted, static_cast<std::uint32_t>(cpu_dma_latency_none)));
    if (const ssize_t n = ::write(fd_.get(), &value, sizeof value); n != sizeof value) {
        failed("Failed to write /dev/cpu_dma_latency: " +
               (n < 0 ? errno_message(errno) : short_write(n, sizeof value)));
        fd_.reset();
        held_.reset();
        return;
    }
    held_ = wanted;
    if (failing_)
        log_("/dev/cpu_dma_latency held now; what failed before has passed");
    failing_ = false;
}

void GlobalHolder::failed(const std::string& why) {
    // The first failure only: the caller may try again often (latgovd
    // does every second).
    if (!failing_)
        log_(why);
    failing_ = true;
}

} // namespace latgov
