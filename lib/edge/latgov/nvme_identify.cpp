#include "latgov/nvme_identify.hpp"

#include "latgov/fd.hpp"

#include <endian.h>
#include <libnvme.h>

namespace latgov {

std::vector<NvmePowerState> read_nvme_power_states(const std::string& controller) {
    Fd fd(nvme_open(controller.c_str()));
    if (!fd)
        return {};
    nvme_id_ctrl id{};
    if (nvme_identify_ctrl(fd.get(), &id) != 0)
        return {};
    std::vector<NvmePowerState> states;
    // npss is zero-based: npss + 1 descriptors are valid.
    for (int i = 0; i <= id.npss && i < 32; ++i) {
        const nvme_id_psd& psd = id.psd[i];
        NvmePowerState state;
        state.index = i;
        // MXPS selects 0.0001 W units instead of 0.01 W.
        const unsigned mp = le16toh(psd.mp);
        state.max_power_centiwatts = (psd.flags & NVME_PSD_FLAGS_MXPS) != 0 ? mp / 100 : mp;
        state.entry_latency_us = le32toh(psd.enlat);
        state.exit_latency_us = le32toh(psd.exlat);
        state.non_operational = (psd.flags & NVME_PSD_FLAGS_NOPS) != 0;
        states.push_back(state);
    }
    return states;
}

void add_nvme_power_states(const SysRoot& root, Topology& topology) {
    if (!root.is_live())
        return;
    for (auto& controller : topology.controllers)
        controller.power_states = read_nvme_power_states(controller.name);
}

} // namespace latgov
