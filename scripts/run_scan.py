#!/usr/bin/env python3
"""Scan a grid of numeric retrieval settings, ranked by a metric with a Recall@20 guard.

Runs from a checkout without installation; `--help` lists the options and docs/EVAL.md explains
the output.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aml_retriever.evaluation.cli import run_scan

if __name__ == "__main__":
    sys.exit(run_scan())
