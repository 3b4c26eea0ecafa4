// latgovd: the latency governor daemon.
#include "daemon.hpp"

int main(int argc, char** argv) {
    return latgov::daemon_main(argc, argv);
}
