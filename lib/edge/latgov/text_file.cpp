#include "latgov/text_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace latgov {

namespace {

Error read_error(const std::filesystem::path& path, const std::string& reason) {
    return make_error("Failed to read " + path.string() + ": " + reason);
}

} // namespace

Result<std::string> read_text_file(const std::filesystem::path& path, std::size_t max_bytes) {
    // O_NONBLOCK: a FIFO opens at once and reads as empty instead of waiting.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return read_error(path, std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return read_error(path, std::strerror(errno));
    if (S_ISDIR(st.st_mode))
        return read_error(path, std::strerror(EISDIR));
    std::string text;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return read_error(path, std::strerror(errno));
        if (n == 0)
            break;
        if (text.size() + static_cast<std::size_t>(n) > max_bytes)
            return read_error(path, "larger than " + std::to_string(max_bytes) + " bytes");
        text.append(buf, static_cast<std::size_t>(n));
    }
    return text;
}

} // namespace latgov
