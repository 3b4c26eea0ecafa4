// status.json as `latgov status` and `latgov explain` read it: a file that
// is not what latgovd writes is reported as an error (status throws one,
// explain returns one), never a crash or undefined behaviour. An exception
// out of explain is a crash here.
#include "../unit/machines.hpp"
#include "latgov/explain.hpp"
#include "latgov/status_text.hpp"

#include <cstdint>
#include <optional>
#include <stdexcept>

namespace {

// vda on 2 CPUs, as the corpus's documents name it, under the default policy.
struct ExplainMachine {
    latgov::Topology topology = latgov::virtio_machine("haltpoll", "haltpoll");
    latgov::Config config;
    std::map<int, std::vector<latgov::IdleCost>> costs{
        {0, {{"POLL", 0, 0, false}, {"C1", 1, 1, false}}},
        {1, {{"POLL", 0, 0, false}, {"C1", 1, 1, false}}}};
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    static const ExplainMachine machine;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto status = nlohmann::json::parse(text, nullptr, false);
    if (status.is_discarded())
        return 0;
    // With the time now too: when each verdict is measured again.
    for (const auto now_s : {std::optional<std::int64_t>(), std::optional<std::int64_t>(1)}) {
        try {
            (void)latgov::format_status(status, now_s);
        } catch (const nlohmann::json::exception&) {
        } catch (const std::invalid_argument&) {
        }
    }
    (void)latgov::explain_device(
        {machine.topology, machine.config, machine.costs, "declared", status}, "vda");
    return 0;
}
