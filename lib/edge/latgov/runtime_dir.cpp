#include "latgov/runtime_dir.hpp"

#include "latgov/parse.hpp"
#include "latgov/sysroot.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <deque>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <vector>

namespace latgov {

namespace {

// Why `dir`, a directory above the runtime directory, lets someone other
// than root or this user replace what lies below it; nullopt when it does
// not. Whoever may write a directory may rename its entries, so could move
// the runtime directory away and put another in its place, and the next
// latgov process to look it up would use that one (a restore writes back as
// root the values of the journal it finds there). What is opened is checked
// for its owner and mode, but a directory root made in theirs would pass
// that. A sticky directory (/tmp, /dev/shm)
// lets only an entry's owner rename it. A symlink cannot be changed, only
// replaced in its own directory, which is checked too; in a sticky one its
// owner may still replace it, so there it must be root's or this user's.
std::optional<std::string> unsafe_ancestor(const std::filesystem::path& dir) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0)
        return "cannot be checked: " + errno_message(errno);
    const bool theirs = st.st_uid != 0 && st.st_uid != ::geteuid();
    if (S_ISLNK(st.st_mode)) {
        struct stat parent {};
        if (theirs && ::lstat(dir.parent_path().c_str(), &parent) == 0 &&
            (parent.st_mode & S_ISVTX) != 0)
            return "a symlink owned by uid " + std::to_string(st.st_uid) + " in a sticky directory";
        return std::nullopt;
    }
    if (theirs)
        return "owned by uid " + std::to_string(st.st_uid);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
        return fmt::format("group or others may write it (mode {:04o}, not sticky)",
                           st.st_mode & 07777);
    return std::nullopt;
}

// The directories a lookup of `path` searches and the symlinks it
// follows, walked as the kernel walks it: each name looked up in the
// directory reached so far, a symlink's target walked in its place (at
// most 40 of them), ".." going up from where the walk is, which after a
// symlink is where the link led. Every directory searched on the way
// matters, not only those above the directory reached: one that leads
// through someone else's directory to another link is theirs to redirect.
Result<std::vector<std::filesystem::path>> walked(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path absolute = fs::absolute(path, ec);
    if (ec)
        return make_error("Failed to resolve " + path.string() + ": " + ec.message());
    const fs::path relative = absolute.relative_path();
    std::deque<fs::path> names(relative.begin(), relative.end());
    std::vector<fs::path> seen;
    fs::path at = absolute.root_path();
    int links = 0;
    while (!names.empty()) {
        const fs::path name = names.front();
        names.pop_front();
        if (name.empty() || name == ".")
            continue;
        if (name == "..") {
            at = at.parent_path(); // that of the root is the root
            continue;
        }
        if (std::find(seen.begin(), seen.end(), at) == seen.end())
            seen.push_back(at);
        const fs::path next = at / name;
        struct stat st {};
        if (::lstat(next.c_str(), &st) != 0)
            return make_error("Failed to resolve " + path.string() + ": " + next.string() + ": " +
                              errno_message(errno));
        if (!S_ISLNK(st.st_mode)) {
            at = next;
            continue;
        }
        if (++links > 40)
            return make_error("Failed to resolve " + path.string() + ": " + errno_message(ELOOP));
        seen.push_back(next);
        const fs::path target = fs::read_symlink(next, ec);
        if (ec)
            return make_error("Failed to resolve " + path.string() + ": " + next.string() + ": " +
                              ec.message());
        if (target.is_absolute())
            at = target.root_path();
        const fs::path rest = target.relative_path();
        names.insert(names.begin(), rest.begin(), rest.end());
    }
    return seen;
}

// Every directory a lookup of `path` searches, and every symlink it
// follows, must be safe (unsafe_ancestor).
Result<void> check_ancestors(const std::filesystem::path& path) {
    const auto seen = walked(path);
    if (!seen)
        return seen.error();
    for (const auto& dir : *seen) // in the order the lookup meets them
        if (auto why = unsafe_ancestor(dir))
            return make_error("Refusing runtime directory " + path.string() + ": " + dir.string() +
                              ", on its path, is " + *why + ", so another user could replace it");
    return {};
}

std::string joined(const std::string& dir, std::string_view name) {
    return dir + "/" + std::string(name);
}

// Names without a slash, so a name can never leave the directory.
Result<void> check_name(std::string_view name) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos)
        return make_error("Bad file name \"" + std::string(name) + "\"");
    return {};
}

Result<void> write_all(int fd, std::string_view text, const std::string& shown) {
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return make_error("Failed to write " + shown + ": " +
                              errno_message(n < 0 ? errno : ENOSPC));
        done += static_cast<size_t>(n);
    }
    return {};
}

} // namespace

Result<std::optional<std::string>> read_file_at(int dir_fd, const std::string& shown_dir,
                                                std::string_view name, size_t max_bytes) {
    if (auto ok = check_name(name); !ok)
        return ok.error();
    const std::string shown = joined(shown_dir, name);
    Fd fd(::openat(dir_fd, std::string(name).c_str(),
                   O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd) {
        if (errno == ENOENT)
            return std::optional<std::string>{};
        return make_error("Failed to open " + shown + ": " +
                          (errno == ELOOP ? std::string("is a symlink, refusing to follow it")
                                          : errno_message(errno)));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        return make_error("Failed to read " + shown + ": not a regular file");
    std::string text;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return make_error("Failed to read " + shown + ": " + errno_message(errno));
        if (n == 0)
            break;
        text.append(buf, static_cast<size_t>(n));
        if (text.size() > max_bytes)
            return make_error("Failed to read " + shown + ": larger than " +
                              std::to_string(max_bytes) + " bytes");
    }
    return std::optional<std::string>(std::move(text));
}

std::string next_temporary_name(std::string_view name) {
    static std::atomic<unsigned> counter{0};
    return "." + std::string(name) + "." + std::to_string(::getpid()) + "." +
           std::to_string(counter++) + ".tmp";
}

Result<void> write_file_atomic_at(int dir_fd, const std::string& shown_dir, std::string_view name,
                                  std::string_view text, mode_t mode, Durability durability) {
    if (auto ok = check_name(name); !ok)
        return ok.error();
    // Unique per process and call: two writers never share a temporary, and
    // O_EXCL|O_NOFOLLOW refuses anything planted under the name. A name
    // taken already is a killed process's of the same pid (the kernel gave
    // it again, as in a container where latgovd always has the same one),
    // which latgovd removes at start-up (remove_dead_temporaries_at) but
    // another caller may not have: the next name is tried.
    constexpr int attempts = 1000;
    std::string tmp;
    Fd fd;
    int error = EEXIST;
    for (int attempt = 0; attempt < attempts && error == EEXIST; ++attempt) {
        tmp = next_temporary_name(name);
        const int opened = ::openat(dir_fd, tmp.c_str(),
                                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        error = opened < 0 ? errno : 0;
        fd = Fd(opened);
    }
    const std::string shown_tmp = joined(shown_dir, tmp);
    if (!fd)
        return make_error("Failed to create " + shown_tmp + ": " + errno_message(error));
    auto written = write_all(fd.get(), text, shown_tmp);
    if (written && ::fchmod(fd.get(), mode) != 0) // the umask may have narrowed it
        written = make_error("Failed to chmod " + shown_tmp + ": " + errno_message(errno));
    if (written && durability == Durability::power_loss && ::fsync(fd.get()) != 0)
        written = make_error("Failed to flush " + shown_tmp + ": " + errno_message(errno));
    fd.reset();
    if (written && ::renameat(dir_fd, tmp.c_str(), dir_fd, std::string(name).c_str()) != 0)
        written = make_error("Failed to rename " + shown_tmp + " to " + joined(shown_dir, name) +
                             ": " + errno_message(errno));
    if (!written) {
        ::unlinkat(dir_fd, tmp.c_str(), 0);
        return written;
    }
    // The rename itself lasts once the directory is flushed.
    if (durability == Durability::power_loss && ::fsync(dir_fd) != 0)
        return make_error("Failed to flush " + shown_dir + ": " + errno_message(errno));
    return written;
}

std::size_t remove_dead_temporaries_at(int dir_fd, std::string_view name, TemporariesOf whose) {
    if (!check_name(name))
        return 0;
    // A descriptor of its own, handed to the DIR: a dup() of it would need
    // a second free descriptor (and would drop close-on-exec), and one
    // fdopendir() refused stays with `listed`, which closes it.
    Fd listed(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* dir = listed ? ::fdopendir(listed.get()) : nullptr;
    if (!dir)
        return 0;
    listed.release(); // closedir() closes it
    const std::string prefix = "." + std::string(name) + ".";
    std::vector<std::string> dead;
    while (const dirent* entry = ::readdir(dir)) {
        std::string_view file(entry->d_name);
        if (!file.starts_with(prefix) || !file.ends_with(".tmp"))
            continue;
        // <pid>.<n> between them, as write_file_atomic_at names it.
        auto middle = file.substr(prefix.size(), file.size() - prefix.size() - 4);
        const auto dot = middle.find('.');
        if (dot == std::string_view::npos)
            continue;
        const auto pid = parse_u64(middle.substr(0, dot));
        if (!pid || !parse_u64(middle.substr(dot + 1)) || *pid == 0 || *pid > 4194304)
            continue;
        const bool own = *pid == static_cast<std::uint64_t>(::getpid());
        if ((own && whose == TemporariesOf::dead_processes_and_this_one) ||
            (!own && ::kill(static_cast<pid_t>(*pid), 0) != 0 && errno == ESRCH))
            dead.emplace_back(file);
    }
    ::closedir(dir);
    std::size_t removed = 0;
    for (const auto& file : dead)
        removed += ::unlinkat(dir_fd, file.c_str(), 0) == 0;
    return removed;
}

Result<RuntimeDir> RuntimeDir::open(const std::filesystem::path& path, bool create) {
    if (create) {
        std::error_code ec;
        std::filesystem::create_directories(path.parent_path(), ec);
        if (::mkdir(path.c_str(), runtime_dir_mode) != 0 && errno != EEXIST)
            return make_error("Failed to create " + path.string() + ": " + errno_message(errno));
    }
    Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
        const int err = errno;
        return make_error("Failed to open " + path.string() + ": " +
                          (err == ELOOP || err == ENOTDIR
                               ? std::string("not a directory (a symlink?), refusing it")
                               : errno_message(err)));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
        return make_error("Failed to stat " + path.string() + ": " + errno_message(errno));
    if (st.st_uid != ::geteuid())
        return make_error("Refusing runtime directory " + path.string() + ": owned by uid " +
                          std::to_string(st.st_uid) + ", not by uid " +
                          std::to_string(::geteuid()) + " (someone else created it)");
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return make_error(
            fmt::format("Refusing runtime directory {}: group or others may write it (mode {:04o})",
                        path.string(), st.st_mode & 07777));
    if (auto safe = check_ancestors(path); !safe)
        return safe.error();
    // Whoever can open the directory can flock it: readable by others, it
    // would let any user keep latgovd and `latgovd --restore` out.
    std::optional<mode_t> narrowed_from;
    if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
        if (::fchmod(fd.get(), st.st_mode & 07777 & ~static_cast<mode_t>(S_IRGRP | S_IROTH)) != 0)
            return make_error(
                fmt::format("Failed to make {} unreadable to others (mode {:04o}): {}",
                            path.string(), st.st_mode & 07777, errno_message(errno)));
        narrowed_from = st.st_mode & 07777;
    }
    RuntimeDir dir(path, std::move(fd));
    dir.narrowed_from_ = narrowed_from;
    return dir;
}

namespace {

// The pids holding a flock on the file behind `fd`, from /proc/locks
// ("1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"); nullopt when that
// cannot be read.
std::optional<std::vector<long>> flock_holders(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return std::nullopt;
    const std::string id =
        fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev), st.st_ino);
    std::ifstream locks("/proc/locks");
    if (!locks)
        return std::nullopt;
    std::vector<long> holders;
    std::string line;
    while (std::getline(locks, line)) {
        std::istringstream fields(line);
        std::string number, kind, mode, access, pid, file;
        fields >> number >> kind >> mode >> access >> pid >> file;
        if (kind == "FLOCK" && file == id)
            if (auto value = parse_u64(pid))
                holders.push_back(static_cast<long>(*value));
    }
    return holders;
}

// For the message only.
std::optional<long> flock_holder(int fd) {
    auto holders = flock_holders(fd);
    if (!holders || holders->empty())
        return std::nullopt;
    return holders->front();
}

} // namespace

std::optional<std::vector<long>> runtime_dir_lock_holders(const std::filesystem::path& path) {
    const Fd dir(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir)
        return std::nullopt;
    return flock_holders(dir.get());
}

std::optional<bool> runtime_dir_locked(const std::filesystem::path& path) {
    auto holders = runtime_dir_lock_holders(path);
    if (!holders)
        return std::nullopt;
    return !holders->empty();
}

std::string RuntimeDir::narrowed_message() const {
    if (!narrowed_from_)
        return "";
    return fmt::format("made {} unreadable to group and others (mode {:04o} -> {:04o}): whoever "
                       "can open it can lock it; its files stay readable by name",
                       path_.string(), *narrowed_from_,
                       *narrowed_from_ & ~static_cast<mode_t>(S_IRGRP | S_IROTH));
}

Result<void> RuntimeDir::guard_cpus(const SysRoot& root) {
    std::string_view lock = "/dev/cpu_dma_latency";
    auto fd = root.open(lock, O_RDONLY | O_CLOEXEC);
    if (!fd && (errno == ENOENT || errno == EPERM || errno == EACCES)) {
        // No node here, or a device cgroup that denies it: the CPUs' own
        // directory, as before there was a node to lock.
        lock = "/sys/devices/system/cpu";
        fd = root.open(lock, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (!fd && errno == ENOENT)
            return {};
    }
    const std::string shown = root.resolve(lock).string();
    if (!fd)
        return make_error("Failed to open " + shown + ": " + errno_message(errno));
    cpus_path_ = shown;
    cpus_fd_ = std::move(*fd);
    return {};
}

Result<bool> RuntimeDir::try_lock() {
    cpus_busy_ = false;
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            return false;
        return make_error("Failed to lock " + path_.string() + ": " + errno_message(errno));
    }
    if (!cpus_fd_ || ::flock(cpus_fd_.get(), LOCK_EX | LOCK_NB) == 0)
        return true;
    const int err = errno;
    ::flock(fd_.get(), LOCK_UN); // neither, rather than half
    if (err == EWOULDBLOCK) {
        cpus_busy_ = true;
        return false;
    }
    return make_error("Failed to lock " + cpus_path_ + ": " + errno_message(err));
}

std::string RuntimeDir::busy_message() const {
    if (cpus_busy_) {
        const auto pid = flock_holder(cpus_fd_.get());
        return "Failed to lock " + cpus_path_ +
               ": a latgovd, `latgovd --restore` or `latgov calibrate` with another runtime "
               "directory" +
               (pid ? " (pid " + std::to_string(*pid) + ")" : std::string()) +
               " holds it and writes the same PM QoS limits";
    }
    const auto pid = flock_holder(fd_.get());
    return "Failed to lock " + path_.string() +
           ": another latgovd, `latgovd --restore` or `latgov calibrate`" +
           (pid ? " (pid " + std::to_string(*pid) + ")" : std::string()) +
           " holds it and writes the same PM QoS limits";
}

Result<void> RuntimeDir::lock() {
    auto locked = try_lock();
    if (!locked)
        return locked.error();
    if (!*locked)
        return make_error(busy_message());
    return {};
}

Result<RuntimeDir> RuntimeDir::open_locked(const std::filesystem::path& path, bool create) {
    auto dir = open(path, create);
    if (!dir)
        return dir;
    if (auto locked = dir->lock(); !locked)
        return locked.error();
    return dir;
}

Result<std::optional<std::string>> RuntimeDir::read(std::string_view name, size_t max_bytes) const {
    return read_file_at(fd_.get(), path_.string(), name, max_bytes);
}

Result<void> RuntimeDir::write_atomic(std::string_view name, std::string_view text,
                                      mode_t mode) const {
    return write_file_atomic_at(fd_.get(), path_.string(), name, text, mode);
}

Result<void> RuntimeDir::remove(std::string_view name) const {
    if (auto ok = check_name(name); !ok)
        return ok.error();
    if (::unlinkat(fd_.get(), std::string(name).c_str(), 0) != 0 && errno != ENOENT)
        return make_error("Failed to remove " + joined(path_.string(), name) + ": " +
                          errno_message(errno));
    return {};
}

namespace {

Result<Fd> open_parent(const std::filesystem::path& path) {
    const auto parent =
        path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
    Fd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir)
        return make_error("Failed to open " + parent.string() + ": " + errno_message(errno));
    return dir;
}

} // namespace

Result<std::optional<std::string>> read_file_nofollow(const std::filesystem::path& path,
                                                      size_t max_bytes) {
    auto dir = open_parent(path);
    if (!dir) {
        std::error_code ec;
        if (!std::filesystem::exists(path.parent_path(), ec) && !ec)
            return std::optional<std::string>{};
        return dir.error();
    }
    return read_file_at(dir->get(), path.parent_path().string(), path.filename().string(),
                        max_bytes);
}

Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view text,
                               mode_t mode, Durability durability) {
    auto dir = open_parent(path);
    if (!dir)
        return make_error("Failed to write " + path.string() + ": " + dir.error().message);
    return write_file_atomic_at(dir->get(), path.parent_path().string(), path.filename().string(),
                                text, mode, durability);
}

std::size_t remove_dead_temporaries(const std::filesystem::path& path, TemporariesOf whose) {
    auto dir = open_parent(path);
    return dir ? remove_dead_temporaries_at(dir->get(), path.filename().string(), whose) : 0;
}

} // namespace latgov
