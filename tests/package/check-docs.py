#!/usr/bin/env python3
"""check-docs.py: every option the binaries' --help prints, and every
configuration key, is documented in the man pages; every latgov command and
option is offered by the bash completion.

Usage: check-docs.py LATGOVD LATGOV SOURCE_DIR
Keys come from config/latgov.toml (set and commented-out lines) and from
the key lists of the configuration parser (lib/core/latgov/config.cpp); both must
be found and non-empty. Prints what is missing and exits 1, or prints what
was checked and exits 0.
"""
import pathlib
import re
import subprocess
import sys

OPTION = re.compile(r"(?<![\w/-])(--?[A-Za-z][\w-]*)")


def help_options(binary):
    out = subprocess.run([binary, "--help"], check=True, capture_output=True, text=True).stdout
    options = set(OPTION.findall(out))
    if not options:
        sys.exit(f"check-docs: no option found in `{binary} --help`")
    return out, options


def help_commands(help_text):
    # "Commands:" block of `latgov --help`: two-space indented first words
    block = help_text.split("Commands:", 1)[1].split("Options:", 1)[0]
    commands = {m.group(1) for m in re.finditer(r"^  ([a-z]+)\b", block, re.M)}
    if not commands:
        sys.exit("check-docs: no command found in `latgov --help`")
    return commands


def config_keys(src):
    keys = set()
    toml = (src / "config/latgov.toml").read_text()
    for m in re.finditer(r"^#? ?([a-z_]+) = ", toml, re.M):
        keys.add(m.group(1))
    parser = (src / "lib/core/latgov/config.cpp").read_text()
    lists = re.findall(r"_keys\[\] = \{([^}]*)\}", parser)
    if len(lists) < 3:
        sys.exit("check-docs: the key lists (daemon, policy, matcher) were not found in "
                 "lib/core/latgov/config.cpp")
    for body in lists:
        keys.update(re.findall(r'"([a-z_]+)"', body))
    if len(keys) < 10:
        sys.exit(f"check-docs: only {len(keys)} configuration keys found")
    return keys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    latgovd, latgov, src = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    man = src / "doc/man"
    missing = []
    checked = 0

    _, daemon_options = help_options(latgovd)
    page = (man / "latgovd.8.scd").read_text()
    for opt in sorted(daemon_options):
        checked += 1
        if f"*{opt}*" not in page:
            missing.append(f"latgovd(8) does not document {opt} (in latgovd --help)")

    cli_help, cli_options = help_options(latgov)
    commands = help_commands(cli_help)
    page = (man / "latgov.8.scd").read_text()
    completion = (src / "completion/latgov.bash").read_text()
    for opt in sorted(cli_options):
        checked += 1
        if f"*{opt}*" not in page:
            missing.append(f"latgov(8) does not document {opt} (in latgov --help)")
        if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", completion):
            missing.append(f"the bash completion does not offer {opt} (in latgov --help)")
    for cmd in sorted(commands):
        checked += 1
        if not re.search(rf"^\*{cmd}\*", page, re.M):
            missing.append(f"latgov(8) has no entry for the command {cmd}")
        if not re.search(rf'commands="[^"]*\b{cmd}\b', completion):
            missing.append(f"the bash completion does not offer the command {cmd}")

    page = (man / "latgov.toml.5.scd").read_text()
    keys = config_keys(src)
    for key in sorted(keys):
        checked += 1
        if not re.search(rf"^\*{key}\*", page, re.M):
            missing.append(f"latgov.toml(5) has no entry for the key {key}")

    for line in missing:
        print(f"MISSING {line}")
    if missing:
        sys.exit(1)
    print(f"documented: {len(daemon_options)} latgovd options, {len(cli_options)} latgov options, "
          f"{len(commands)} commands, {len(keys)} configuration keys ({checked} checks)")


if __name__ == "__main__":
    main()
