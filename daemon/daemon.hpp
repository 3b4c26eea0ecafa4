#pragma once

namespace latgov {

// `latgovd`: the governor daemon.
int daemon_main(int argc, char** argv);

} // namespace latgov
