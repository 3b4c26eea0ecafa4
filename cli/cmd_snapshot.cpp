// `latgov snapshot -o FILE.tar.gz`: capture the files topology discovery and
// `latgov doctor` read, and latgovd's status file.
#include "commands.hpp"
#include "latgov/config.hpp"
#include "latgov/discovery.hpp"
#include "latgov/snapshot.hpp"

#include <cstdio>
#include <fmt/format.h>

namespace latgov::cli {

int snapshot(const Args& args) {
    std::string output;
    for (size_t i = 0; i < args.rest.size(); ++i) {
        if ((args.rest[i] == "-o" || args.rest[i] == "--output") && i + 1 < args.rest.size())
            output = args.rest[++i];
        else
            return option_error("snapshot", args.rest[i], {"-o", "--output"});
    }
    if (output.empty())
        return usage_error("snapshot: -o FILE.tar.gz is required");
    SysRoot root(args.sysroot);
    root.start_capture();
    auto topology = discover_topology(root);
    if (!topology)
        return fail(topology.error().message);
    capture_doctor_files(root, default_runtime_dir);
    if (auto written = write_snapshot(*root.capture(), output); !written)
        return fail(written.error().message);
    fmt::print(stderr, "latgov: wrote {} ({} paths, {} devices)\n", output,
               root.capture()->entries().size(), topology->devices.size());
    return 0;
}

} // namespace latgov::cli
