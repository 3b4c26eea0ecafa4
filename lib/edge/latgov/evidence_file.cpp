#include "latgov/evidence_file.hpp"

#include "latgov/fd.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/text_file.hpp"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace latgov {

Result<EvidenceBook> load_evidence(const std::filesystem::path& path) {
    auto text = read_text_file(path);
    if (!text)
        return text.error();
    return parse_evidence(*text, path.string());
}

Result<void> save_evidence(const std::filesystem::path& path, const EvidenceBook& book) {
    std::error_code ec;
    if (path.has_parent_path())
        std::filesystem::create_directories(path.parent_path(), ec);
    if (ec)
        return make_error("Failed to create " + path.parent_path().string() + ": " + ec.message());
    const std::string text = format_evidence(book);
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
