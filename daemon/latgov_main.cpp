// latgov: inspect what the governor sees and does.
#include "latgov/cli.hpp"

int main(int argc, char** argv) {
    return latgov::cli_main(argc, argv);
}
