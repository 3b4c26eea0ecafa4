#include "latgov/uevent.hpp"

#include <array>
#include <optional>
#include <utility>

namespace latgov {

namespace {

std::optional<std::string_view> field(std::string_view line, std::string_view key) {
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == '=')
        return line.substr(key.size() + 1);
    return std::nullopt;
}

} // namespace

Result<Uevent> parse_uevent(std::string_view datagram) {
    if (datagram.substr(0, 8) == std::string_view("libudev\0", 8))
        return make_error("Failed to parse uevent: a udev message, not the kernel's");
    const auto header_end = datagram.find('\0');
    const auto header = datagram.substr(0, header_end);
    if (header.find('@') == std::string_view::npos)
        return make_error("Failed to parse uevent: no ACTION@DEVPATH header");
    Uevent event;
    std::string_view rest =
        header_end == std::string_view::npos ? std::string_view{} : datagram.substr(header_end + 1);
    while (!rest.empty()) {
        const auto end = rest.find('\0');
        const auto line = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
        for (auto [key, value] :
             {std::pair{"ACTION", &event.action}, std::pair{"DEVPATH", &event.devpath},
              std::pair{"SUBSYSTEM", &event.subsystem}, std::pair{"NVME_AEN", &event.nvme_aen}})
            if (auto v = field(line, key))
                *value = *v;
    }
    if (event.action.empty() || event.devpath.empty() || event.subsystem.empty())
        return make_error("Failed to parse uevent '" + std::string(header) +
                          "': ACTION, DEVPATH or SUBSYSTEM missing");
    return event;
}

bool changes_topology(const Uevent& event) {
    static constexpr std::array<std::string_view, 5> subsystems{"block", "nvme", "nvme-subsystem",
                                                                "cpu", "pci"};
    static constexpr std::array<std::string_view, 8> actions{
        "add", "remove", "change", "online", "offline", "move", "bind", "unbind"};
    auto in = [](const auto& set, std::string_view s) {
        for (auto x : set)
            if (x == s)
                return true;
        return false;
    };
    return in(subsystems, event.subsystem) && in(actions, event.action);
}

bool may_change_nothing(const Uevent& event) {
    if (event.action != "change")
        return false;
    return event.subsystem == "block" || (event.subsystem == "nvme" && !event.nvme_aen.empty());
}

} // namespace latgov
