#!/usr/bin/env python3
"""Evaluate retrieval on synthetic suites or replay files (in-process or over HTTP).

Runs from a checkout without installation; `--help` lists the options and docs/EVAL.md explains
the output.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aml_retriever.evaluation.cli import run_eval

if __name__ == "__main__":
    sys.exit(run_eval())
