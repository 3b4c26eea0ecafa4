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
    auto status = nlohmann::json::parse(*text, nullptr, false);
    if (status.is_discarded() || !status.is_object())
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
