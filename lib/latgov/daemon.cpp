#include "latgov/daemon.hpp"

#include "latgov/topology_json.hpp"

#include <csignal>
#include <fmt/core.h>

namespace latgov {

int daemon_main(int argc, char** argv) {
    std::string sysroot = "/";
    for (int i = 1; i < argc; ++i)
        if (std::string_view(argv[i]) == "--sysroot" && i + 1 < argc)
            sysroot = argv[++i];
    SysRoot root(sysroot);
    auto topology = discover_topology(root);
    if (!topology) {
        fmt::print(stderr, "latgovd: {}\n", topology.error().message);
        return 1;
    }
    fmt::print("{}", format_topology_table(*topology));
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    int sig = 0;
    sigwait(&set, &sig);
    return 0;
}

} // namespace latgov
