#include "latgov/sysroot.hpp"

#include "latgov/config.hpp"
#include "latgov/fd.hpp"
#include "latgov/parse.hpp"
#include "latgov/text_file.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace latgov {

namespace {

constexpr int max_symlinks = 40; // as the kernel's path walk

constexpr std::size_t sysfs_cap = 64 * 1024;
constexpr std::size_t debugfs_cap = 1024 * 1024;
constexpr std::size_t procfs_cap = 64 * 1024 * 1024;
constexpr std::size_t other_cap = 1024 * 1024;

// The non-empty components of a path.
std::vector<std::string> split_path(std::string_view path) {
    const auto parts = words(path, '/');
    return {parts.begin(), parts.end()};
}

std::string parent_of(const std::string& path) {
    auto pos = path.rfind('/');
    return pos == std::string::npos || pos == 0 ? std::string{} : path.substr(0, pos);
}

Result<std::string> read_link_at(int fd, const char* name) {
    char target[PATH_MAX];
    const ssize_t n = ::readlinkat(fd, name, target, sizeof target);
    if (n < 0)
        return make_error(errno_message(errno));
    if (static_cast<std::size_t>(n) == sizeof target)
        return make_error(errno_message(ENAMETOOLONG));
    return std::string(target, static_cast<std::size_t>(n));
}

int open_in_root(int root_fd, std::string_view abs, int flags) {
    std::string rel(abs);
    rel.erase(0, rel.find_first_not_of('/'));
    if (rel.empty())
        rel = ".";
    open_how how{};
    how.flags = static_cast<unsigned>(flags);
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    const long fd = ::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how);
    // ENOSYS: Linux before 5.6; EPERM: what older seccomp profiles (Docker's
    // before 20.10) answer for a system call they do not know.
    if (fd < 0 && (errno == ENOSYS || errno == EPERM))
        return open_in_root_walking(root_fd, rel, flags);
    return static_cast<int>(fd);
}

} // namespace

std::string errno_message(int err) {
    return std::strerror(err);
}

std::size_t read_cap(std::string_view abs) {
    if (abs.starts_with("/sys/kernel/debug/"))
        return debugfs_cap;
    if (abs.starts_with("/sys/"))
        return sysfs_cap;
    if (abs.starts_with("/proc/"))
        return procfs_cap;
    if (abs.starts_with(default_runtime_dir) &&
        abs.substr(default_runtime_dir.size()).starts_with('/'))
        return max_text_file_bytes;
    return other_cap;
}

int open_in_root_walking(int root_fd, std::string_view path, int flags) {
    std::vector<Fd> dirs; // the directories walked into; empty: at the root
    const auto here = [&] { return dirs.empty() ? root_fd : dirs.back().get(); };
    std::deque<std::string> pending;
    for (auto& part : split_path(path))
        pending.push_back(std::move(part));
    int links = 0;
    while (!pending.empty()) {
        std::string name = std::move(pending.front());
        pending.pop_front();
        if (name == ".")
            continue;
        if (name == "..") {
            if (!dirs.empty())
                dirs.pop_back();
            continue;
        }
        const bool last = pending.empty();
        Fd fd(::openat(here(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
        if (!fd)
            return -1;
        struct stat st {};
        if (::fstat(fd.get(), &st) != 0)
            return -1;
        if (S_ISLNK(st.st_mode) && !(last && (flags & O_NOFOLLOW))) {
            if (++links > max_symlinks) {
                errno = ELOOP;
                return -1;
            }
            auto target = read_link_at(fd.get(), "");
            if (!target)
                return -1; // errno still says why
            if (target->starts_with('/'))
                dirs.clear();
            auto parts = split_path(*target);
            pending.insert(pending.begin(), parts.begin(), parts.end());
            continue;
        }
        // O_NOFOLLOW: a symlink swapped in since the check is refused.
        if (last)
            return ::openat(here(), name.c_str(), flags | O_NOFOLLOW);
        if (!S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            return -1;
        }
        dirs.push_back(std::move(fd));
    }
    return ::openat(here(), ".", flags); // the path named a directory
}

void CaptureLog::add(std::string path, CapturedEntry entry) {
    entries_.insert_or_assign(std::move(path), std::move(entry));
}

SysRoot::SysRoot(std::filesystem::path root) : root_(std::move(root)) {}

std::filesystem::path SysRoot::resolve(std::string_view abs) const {
    if (is_live())
        return std::filesystem::path(abs);
    auto rel = abs;
    while (!rel.empty() && rel.front() == '/')
        rel.remove_prefix(1);
    return root_ / rel;
}

int SysRoot::open_fd(std::string_view abs, int flags) const {
    if (is_live())
        return ::open(std::string(abs).c_str(), flags);
    Fd root(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root)
        return -1;
    return open_in_root(root.get(), abs, flags);
}

Result<Fd> SysRoot::open(std::string_view abs, int flags) const {
    Fd fd(open_fd(abs, flags));
    if (!fd) {
        const int err = errno;
        auto error =
            make_error("Failed to open " + resolve(abs).string() + ": " + errno_message(err));
        errno = err;
        return error;
    }
    return fd;
}

void SysRoot::start_capture() {
    capture_ = std::make_shared<CaptureLog>();
}

void SysRoot::record(std::string path, CapturedEntry entry) const {
    if (capture_)
        capture_->add(std::move(path), std::move(entry));
}

// Walks `abs` one component at a time so that every symlink on the way is
// kept as a symlink, and the file lands at its real place in the capture.
std::string SysRoot::record_path(std::string_view abs) const {
    if (!capture_)
        return {};
    std::deque<std::string> pending;
    for (auto& part : split_path(abs))
        pending.push_back(std::move(part));
    std::string current;
    int hops = 0;
    while (!pending.empty()) {
        std::string part = std::move(pending.front());
        pending.pop_front();
        if (part == ".")
            continue;
        if (part == "..") {
            current = parent_of(current);
            continue;
        }
        std::string next = current + "/" + part;
        struct stat st {};
        if (::lstat(resolve(next).c_str(), &st) != 0)
            return {};
        if (S_ISLNK(st.st_mode)) {
            auto target = read_link(next);
            if (!target || ++hops > max_symlinks)
                return {};
            record(next, {CapturedEntry::Kind::symlink, *target});
            if (!target->empty() && target->front() == '/')
                current.clear();
            auto parts = split_path(*target);
            pending.insert(pending.begin(), parts.begin(), parts.end());
            continue;
        }
        if (S_ISDIR(st.st_mode))
            record(next, {CapturedEntry::Kind::directory, {}});
        current = std::move(next);
    }
    return current.empty() ? "/" : current;
}

Result<std::string> SysRoot::read(std::string_view abs) const {
    const auto path = resolve(abs);
    // A FIFO in a tree must not block the reader.
    auto fd = open(abs, O_RDONLY | O_CLOEXEC | (is_live() ? 0 : O_NONBLOCK));
    if (!fd)
        return fd.error();
    const std::size_t cap = read_cap(abs);
    std::string content;
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd->get(), buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return make_error("Failed to read " + path.string() + ": " + errno_message(errno));
        }
        if (n == 0)
            break;
        if (content.size() + static_cast<std::size_t>(n) > cap)
            return make_error("Failed to read " + path.string() + ": larger than " +
                              std::to_string(cap) + " bytes");
        content.append(buf, static_cast<size_t>(n));
    }
    if (capture_) {
        // The file is stored at its place inside the root, with every
        // symlink on the way to it kept as a symlink.
        if (auto real = record_path(abs); !real.empty())
            record(std::move(real), {CapturedEntry::Kind::file, content});
    }
    return content;
}

bool SysRoot::exists(std::string_view abs) const {
    struct stat st {};
    bool present = false;
    if (is_live()) {
        present = ::stat(std::string(abs).c_str(), &st) == 0;
    } else {
        Fd fd(open_fd(abs, O_PATH | O_CLOEXEC));
        present = static_cast<bool>(fd);
    }
    if (present)
        record_path(abs);
    return present;
}

Result<std::vector<std::string>> SysRoot::list(std::string_view abs) const {
    const auto path = resolve(abs);
    Fd fd(open_fd(abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* dir = fd ? ::fdopendir(fd.get()) : nullptr;
    if (!dir)
        return make_error("Failed to list " + path.string() + ": " + errno_message(errno));
    fd.release(); // the DIR owns it now
    std::vector<std::string> names;
    std::vector<std::string> kept; // symlinks and directories, for a capture
    for (;;) {
        // readdir() sets errno only on failure: cleared before each call,
        // or a capture's fstatat() of an entry gone meanwhile would be
        // taken for one
        errno = 0;
        const dirent* entry = ::readdir(dir);
        if (!entry)
            break;
        const std::string_view name = entry->d_name;
        if (name == "." || name == "..")
            continue;
        names.emplace_back(name);
        struct stat st {};
        if (capture_ && ::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            (S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode)))
            kept.emplace_back(name);
    }
    const int err = errno;
    ::closedir(dir);
    if (err != 0)
        return make_error("Failed to list " + path.string() + ": " + errno_message(err));
    std::sort(names.begin(), names.end());
    if (capture_) {
        // Keep the listed symlinks and directories, so the capture lists the
        // same names; plain files are kept only when read.
        record_path(abs);
        for (const auto& name : kept)
            record_path(std::string(abs) + "/" + name);
    }
    return names;
}

Result<std::string> SysRoot::read_link(std::string_view abs) const {
    const auto path = resolve(abs);
    // O_NOFOLLOW with O_PATH: the link itself, its parents resolved in the root.
    Fd fd(open_fd(abs, O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (fd && ::fstat(fd.get(), &st) == 0 && !S_ISLNK(st.st_mode))
        errno = EINVAL; // as readlink(2) says of a file that is not a link
    if (!fd || !S_ISLNK(st.st_mode))
        return make_error("Failed to read link " + path.string() + ": " + errno_message(errno));
    auto target = read_link_at(fd.get(), "");
    if (!target)
        return make_error("Failed to read link " + path.string() + ": " + target.error().message);
    return target;
}

Result<std::string> SysRoot::link_basename(std::string_view abs) const {
    auto target = read_link(abs);
    if (!target)
        return target.error();
    if (capture_)
        record_path(abs);
    return std::filesystem::path(*target).filename().string();
}

} // namespace latgov
