#!/usr/bin/env python3
"""check-docs.py: every option the binaries' --help prints, and every
configuration key, is documented in the man pages; every latgov command and
option is offered by the bash completion. And the other way: an option a
man page documents is one the binary's --help lists, per command for latgov.

Usage: check-docs.py LATGOVD LATGOV SOURCE_DIR
Keys come from config/latgov.toml (set and commented-out lines) and from
the key lists of the configuration parser (lib/core/latgov/config.cpp); both must
be found and non-empty. A command's options are, in `latgov COMMAND --help`,
the options it prints but the global ones; in latgov(8), those of its
SYNOPSIS paragraph and of its entry under COMMANDS (from its first line to
the next entry); in the completion, those of its case. Prints what is
missing and exits 1, or prints what was checked and exits 0.
"""
import pathlib
import re
import subprocess
import sys

OPTION = re.compile(r"(?<![\w/-])(--?[A-Za-z][\w-]*)")
# An option as the man pages set it: bold, alone ("*--json*").
MAN_OPTION = re.compile(r"\*(--?[A-Za-z][\w-]*)\*")
# latgov's options for every command, and -h/--help after any of them.
GLOBAL_OPTIONS = {"--sysroot", "-h", "--help"}


def help_options(command):
    """The options `COMMAND --help` prints; COMMAND is a binary, or a list
    (a binary and its subcommand)."""
    argv = [command] if isinstance(command, str) else list(command)
    out = subprocess.run([*argv, "--help"], check=True, capture_output=True, text=True).stdout
    options = set(OPTION.findall(out))
    if not options:
        sys.exit(f"check-docs: no option found in `{' '.join(argv)} --help`")
    return out, options


def help_commands(help_text):
    # "Commands:" block of `latgov --help`: two-space indented first words
    block = help_text.split("Commands:", 1)[1].split("Options:", 1)[0]
    commands = {m.group(1) for m in re.finditer(r"^  ([a-z]+)\b", block, re.M)}
    if not commands:
        sys.exit("check-docs: no command found in `latgov --help`")
    return commands


def section(page, name):
    """The text of the man page section `# NAME`, up to the next one."""
    m = re.search(rf"^# {name}\n(.*?)(?=^# |\Z)", page, re.M | re.S)
    if not m:
        sys.exit(f"check-docs: no section {name} in the man page")
    return m.group(1)


def man_entries(text):
    """The entries of a section: each `*name*` at the start of a line, with
    everything up to the next one (its indented description)."""
    entries = {}
    for entry in re.split(r"(?m)^(?=\*)", text):
        m = re.match(r"\*([^*]+)\*", entry)
        if m:
            entries[m.group(1)] = entry
    return entries


def man_options(page):
    """The options a man page's OPTIONS section has entries for: those
    named on each entry's first line."""
    return {opt for entry in man_entries(section(page, "OPTIONS")).values()
            for opt in MAN_OPTION.findall(entry.split("\n", 1)[0])}


def man_command_options(page, commands):
    """Per command, the options latgov(8) documents for it."""
    documented = {cmd: set() for cmd in commands}
    for para in re.split(r"\n\s*\n", section(page, "SYNOPSIS")):
        m = re.match(r"\*latgov\* \[\*--sysroot\* _DIR_\] \*([a-z]+)\*", para.strip())
        if m and m.group(1) in documented:
            documented[m.group(1)].update(MAN_OPTION.findall(para))
    for name, entry in man_entries(section(page, "COMMANDS")).items():
        if name in documented:
            documented[name].update(MAN_OPTION.findall(entry))
    return documented


def completion_options(completion, cmd):
    """The options the completion offers after the command: the word lists
    (compgen -W "...") of its case."""
    m = re.search(rf"^\s*{cmd}\)(.*?);;", completion, re.M | re.S)
    if not m:
        return None
    return {opt for words in re.findall(r'-W "([^"]*)"', m.group(1))
            for opt in OPTION.findall(words)}


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
    for opt in sorted(man_options(page)):
        checked += 1
        if opt not in daemon_options:
            missing.append(f"latgovd(8) documents {opt}, which latgovd --help does not list")

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
    global_options = set(OPTION.findall(cli_help.split("Options:", 1)[1]))
    for opt in sorted(man_options(page)):
        checked += 1
        if opt not in global_options:
            missing.append(f"latgov(8) documents the option {opt}, which latgov --help does "
                           "not list under Options")

    # Per command, both ways: `latgov CMD --help` against its part of
    # latgov(8) and against its case in the completion.
    documented = man_command_options(page, commands)
    for cmd in sorted(commands):
        _, listed = help_options([latgov, cmd])
        listed -= GLOBAL_OPTIONS
        offered = completion_options(completion, cmd)
        if offered is None:
            missing.append(f"the bash completion has no case for the command {cmd}")
            offered = set()
        # latgov takes its global options after the command too.
        for opt in sorted(GLOBAL_OPTIONS - offered):
            checked += 1
            missing.append(f"the bash completion does not offer the global option {opt} "
                           f"after {cmd}")
        offered -= GLOBAL_OPTIONS
        shown = documented[cmd] - GLOBAL_OPTIONS
        # Each against the help, both ways.
        places = [(shown, "latgov(8) does not document {opt} for {cmd}",
                   "latgov(8) documents {opt} for {cmd}"),
                  (offered, "the bash completion does not offer {opt} after {cmd}",
                   "the bash completion offers {opt} after {cmd}")]
        for opt in sorted(listed | shown | offered):
            checked += 1
            for there, lacks, has in places:
                if opt in listed and opt not in there:
                    missing.append(lacks.format(opt=opt, cmd=cmd)
                                   + f" (in latgov {cmd} --help)")
                if opt in there and opt not in listed:
                    missing.append(has.format(opt=opt, cmd=cmd)
                                   + f", which `latgov {cmd} --help` does not list")

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
