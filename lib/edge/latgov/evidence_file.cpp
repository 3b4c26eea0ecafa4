#include "latgov/evidence_file.hpp"

#include "latgov/runtime_dir.hpp"
#include "latgov/text_file.hpp"

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
    return write_file_atomic(path, format_evidence(book), 0644, Durability::power_loss);
}

} // namespace latgov
