"""The ``gpucheck`` command line: ``gpucheck demo`` measures the built-in examples."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpu_notebook import __version__


def _measure_source(source: str, name: str) -> int:
    from gpu_notebook.capture.session import CaptureOptions, CaptureSession
    from gpu_notebook.report.build import build_report

    session = CaptureSession(CaptureOptions(), source)
    status, error = "ok", None
    with session:
        try:
            exec(compile(source, f"<gpucheck example {name}>", "exec"), {"__name__": "__main__"})
        except KeyboardInterrupt:
            status, error = "interrupted", "KeyboardInterrupt"
        except Exception as exc:  # the example's own failure is reported, not hidden
            status, error = "error", f"{type(exc).__name__}: {exc}"
    report = build_report(session.finish(status, error))  # type: ignore[arg-type]
    print(report.text())
    return 0 if status == "ok" else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from gpu_notebook.examples import EXAMPLES

    names = [args.example] if args.example else list(EXAMPLES)
    code = 0
    for name in names:
        print(f"\n=== example: {name} " + "=" * max(0, 60 - len(name)))
        print(EXAMPLES[name].strip())
        print("-" * 72)
        code |= _measure_source(EXAMPLES[name], name)
    return code


def build_parser() -> argparse.ArgumentParser:
    from gpu_notebook.examples import EXAMPLES

    parser = argparse.ArgumentParser(
        prog="gpucheck", description="Is training slow because of the GPU, or the code around it?"
    )
    parser.add_argument("--version", action="version", version=f"gpucheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="measure the built-in example loops and print their reports")
    demo.add_argument("example", nargs="?", choices=sorted(EXAMPLES), help="one example (default: all)")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
