"""``canopy --help`` lists every command without importing any command's module."""

import subprocess
import sys

from canopy.cli import COMMANDS, build_parser


def _helps(parser) -> dict[str, str]:
    sub = next(a for a in parser._actions if a.dest == "command")
    return {c.dest: c.help for c in sub._choices_actions}


def test_the_listing_matches_the_commands_own_help_lines():
    full, listing = _helps(build_parser()), _helps(build_parser(listing=True))
    assert list(full) == list(listing) == list(COMMANDS)
    assert full == listing


def test_help_imports_no_command_and_no_engine_dependency():
    code = ("import sys\nfrom canopy.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('canopy.cli.', 'numpy', "
            "'scipy', 'networkx', 'canopy.engine.execution'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert "usage: canopy" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_command_after_an_option_is_parsed_by_its_own_parser():
    from canopy.cli import _parse
    args = _parse(["--version", "samples", "--optimum"])
    assert args.command == "samples" and args.optimum and callable(args.run)
