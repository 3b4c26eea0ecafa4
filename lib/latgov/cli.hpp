#pragma once

namespace latgov {

// `latgov`: topology, snapshot and status commands.
int cli_main(int argc, char** argv);

} // namespace latgov
