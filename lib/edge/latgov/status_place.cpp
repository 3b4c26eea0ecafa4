#include "latgov/status_place.hpp"

#include "latgov/config.hpp"
#include "latgov/text_file.hpp"

#include <string>
#include <system_error>

namespace latgov {

StatusPlace::StatusPlace(const SysRoot& root, std::optional<std::filesystem::path> given) {
    if (given) {
        dir_ = std::move(*given);
    } else {
        dir_ = root.resolve(default_runtime_dir);
        if (!root.is_live())
            tree_ = root;
    }
}

namespace {

// The parser quotes what it last read: no byte of that reaches a terminal
// (it names control bytes itself; others than ASCII are shown as '?').
std::string sanitized(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
            c = '?';
    return out;
}

} // namespace

Result<nlohmann::json> StatusPlace::load() const {
    const auto path = (dir_ / status_file_name).string();
    const auto abs = std::string(default_runtime_dir) + "/" + std::string(status_file_name);
    auto text = tree_ ? tree_->read(abs) : read_text_file(path);
    if (!text) {
        if (tree_ && !tree_->exists(abs))
            return make_error("no status in the snapshot (" + path + ")");
        std::error_code ec;
        if (!tree_ && !std::filesystem::exists(path, ec) && !ec)
            return make_error("no status at " + path + ": is latgovd running?");
        return text.error(); // there, but not readable: says why
    }
    nlohmann::json status;
    try {
        status = nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
        // "[json.exception.parse_error.101] parse error at line 1, column
        // 11: syntax error ..." -> "at line 1, column 11: syntax error ...";
        // a number too large for a double (out_of_range.406) says so.
        std::string_view why = e.what();
        if (const auto at = why.find("] "); at != std::string_view::npos)
            why.remove_prefix(at + 2);
        if (why.starts_with("parse error "))
            why.remove_prefix(std::string_view("parse error ").size());
        else
            return make_error("Failed to parse " + path + ": " + sanitized(why));
        return make_error("Failed to parse " + path + " " + sanitized(why));
    }
    if (!status.is_object())
        return make_error("Failed to parse " + path + ": not a JSON object");
    return status;
}

bool StatusPlace::present() const {
    if (tree_)
        return tree_->exists(std::string(default_runtime_dir) + "/" +
                             std::string(status_file_name));
    std::error_code ec;
    return std::filesystem::symlink_status(dir_ / status_file_name, ec).type() !=
           std::filesystem::file_type::not_found;
}

nlohmann::json StatusPlace::read() const {
    auto status = load();
    return status ? *status : nlohmann::json(nullptr);
}

} // namespace latgov
