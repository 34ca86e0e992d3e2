"""The ``lycaon`` command: one module per subcommand, each adding its parser (``add_parser``) and
running it (``run``); shared output, image reading and thread sizing in their own modules."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

import lycaon
from lycaon.cli import bench, demo, infer, inspect, models, plan, quantize, selfcheck, serve, simulate
from lycaon.cli.threads import set_threads

__all__ = ["main"]

# The subcommands, in the order ``lycaon --help`` lists them.
COMMANDS = {"selfcheck": selfcheck, "bench": bench, "models": models, "inspect": inspect, "quantize": quantize, "simulate": simulate, "plan": plan,
            "serve": serve, "infer": infer, "demo": demo}

NOT_BUILT: dict[str, str] = {}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="lycaon", description="Homomorphic encryption for private inference.")
    parser.add_argument("--version", action="version", version=f"lycaon {lycaon.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    for command, reason in NOT_BUILT.items():
        later = sub.add_parser(command, help=f"not built yet ({reason})")
        later.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.command in ("serve", "infer") or (args.command, getattr(args, "suite", None)) == ("bench", "e2e"):
        problem = set_threads(getattr(args, "threads", None))
        if problem:
            print(f"lycaon {args.command}: {problem}", file=sys.stderr)
            return 2
    if args.command in NOT_BUILT:
        print(f"lycaon {args.command}: not built yet: {NOT_BUILT[args.command]}", file=sys.stderr)
        return 2
    try:
        status = COMMANDS[args.command].run(args)
        if status is not None:
            return status
    except BrokenPipeError:
        return 0
    except (lycaon.LycaonError, ValueError, OSError, OverflowError) as exc:
        print(f"lycaon: {exc}", file=sys.stderr)
        return 2
    parser.error("unknown command")
    return 2
