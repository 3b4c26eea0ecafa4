#include "latgov/replace_file.hpp"

#include "latgov/fd.hpp"
#include "latgov/sysroot.hpp"

#include <cerrno>
#include <fcntl.h>
#include <string>
#include <unistd.h>

namespace latgov {

Result<void> replace_file(const std::filesystem::path& path, std::string_view text) {
    const std::string tmp = path.string() + ".tmp";
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        return make_error("Failed to write " + tmp + ": " + errno_message(errno));
    fd.reset();
    if (::rename(tmp.c_str(), path.c_str()) != 0)
        return make_error("Failed to rename " + tmp + " to " + path.string() + ": " +
                          errno_message(errno));
    return {};
}

} // namespace latgov
