"""What every verb says when it is misused: one line, exit status 2; a verb given without
its action (``tuimon formats``): that verb's help, on stderr."""
from __future__ import annotations

import sys

EXIT_USAGE = 2


def sub_help(parser, verb: str) -> int:
    """A verb given without its action: its help on stderr, exit status 2."""
    stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        parser.parse_args([verb, "--help"])
    except SystemExit:
        pass
    finally:
        sys.stdout = stdout
    return EXIT_USAGE
