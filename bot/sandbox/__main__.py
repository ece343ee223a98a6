"""``python -m alignbot.bot.sandbox``: the trampoline's command line, as when this was one
module."""

import sys

from .child import _main

_main(sys.argv[1:])
