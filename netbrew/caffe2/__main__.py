"""`python -m netbrew.caffe2 script.py [args]`: runs a Caffe2 script unchanged on netbrew."""

from __future__ import annotations

import runpy
import sys

from netbrew.caffe2.hook import install


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m netbrew.caffe2 script.py [args...]")
        print("Runs a Caffe2 script with `caffe2.*` imports resolved to netbrew.caffe2.")
        raise SystemExit(0 if argv else 2)
    install()
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
