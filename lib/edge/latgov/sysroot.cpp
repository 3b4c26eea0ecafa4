#include "latgov/sysroot.hpp"

#include "latgov/fd.hpp"
#include "latgov/parse.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace latgov {

namespace {

// The non-empty components of a path.
std::vector<std::string> split_path(std::string_view path) {
    std::vector<std::string> parts;
    for (auto part : split(path, '/'))
        if (!part.empty())
            parts.emplace_back(part);
    return parts;
}

std::string parent_of(const std::string& path) {
    auto pos = path.rfind('/');
    return pos == std::string::npos || pos == 0 ? std::string{} : path.substr(0, pos);
}

} // namespace

std::string errno_message(int err) {
    return std::strerror(err);
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

void SysRoot::start_capture() {
    capture_ = std::make_shared<CaptureLog>();
}

void SysRoot::record(std::string path, CapturedEntry entry) const {
    if (capture_)
        capture_->add(std::move(path), std::move(entry));
}

// Walks `abs` one component at a time so that every symlink on the way is
// kept as a symlink, and the file lands at its real place in the capture.
void SysRoot::record_path(std::string_view abs) const {
    if (!capture_)
        return;
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
            return;
        if (S_ISLNK(st.st_mode)) {
            auto target = read_link(next);
            if (!target || ++hops > 40)
                return;
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
}

Result<std::string> SysRoot::read(std::string_view abs) const {
    auto path = resolve(abs);
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd)
        return make_error("Failed to open " + path.string() + ": " + errno_message(errno));
    std::string content;
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return make_error("Failed to read " + path.string() + ": " + errno_message(errno));
        }
        if (n == 0)
            break;
        content.append(buf, static_cast<size_t>(n));
    }
    if (capture_) {
        record_path(abs);
        // The file itself is stored at its resolved place; a symlinked
        // parent was recorded above, so resolve again to find that place.
        std::error_code ec;
        auto real = std::filesystem::canonical(path, ec);
        if (!ec) {
            std::string rel = real.lexically_relative(std::filesystem::canonical(root_)).string();
            record("/" + rel, {CapturedEntry::Kind::file, content});
        }
    }
    return content;
}

bool SysRoot::exists(std::string_view abs) const {
    struct stat st {};
    bool present = ::stat(resolve(abs).c_str(), &st) == 0;
    if (present)
        record_path(abs);
    return present;
}

Result<std::vector<std::string>> SysRoot::list(std::string_view abs) const {
    auto path = resolve(abs);
    std::error_code ec;
    std::filesystem::directory_iterator it(path, ec);
    if (ec)
        return make_error("Failed to list " + path.string() + ": " + ec.message());
    std::vector<std::string> names;
    for (const auto& entry : it)
        names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    if (capture_) {
        record_path(abs);
        // Keep the listed symlinks and directories, so the capture lists the
        // same names; plain files are kept only when read.
        for (const auto& name : names) {
            std::string child = std::string(abs) + "/" + name;
            struct stat st {};
            if (::lstat(resolve(child).c_str(), &st) != 0)
                continue;
            if (S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode))
                record_path(child);
        }
    }
    return names;
}

Result<std::string> SysRoot::read_link(std::string_view abs) const {
    auto path = resolve(abs);
    std::error_code ec;
    auto target = std::filesystem::read_symlink(path, ec);
    if (ec)
        return make_error("Failed to read link " + path.string() + ": " + ec.message());
    return target.string();
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
