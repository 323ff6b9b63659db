"""``python -m deepresearcher.endpoint.call module:function QUESTION``: call an agent function, print its answer.

How a ``module:function`` program runs in a process of its own (``endpoint.program``); the answer is printed on
one line, last, so the runner reads it as a command's answer.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2 or ":" not in argv[0]:
        print("usage: python -m deepresearcher.endpoint.call module:function QUESTION", file=sys.stderr)
        return 2
    module_name, _, function_name = argv[0].partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    answer = function(argv[1])
    if inspect.isawaitable(answer):
        answer = asyncio.run(answer)
    print(" ".join(str(answer if answer is not None else "").split()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
