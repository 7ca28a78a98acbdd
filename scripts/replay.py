#!/usr/bin/env python3
"""Replay converted files against a live server: metrics, Add throughput, Search latency.

Runs from a checkout without installation; `--help` lists the options and docs/EVAL.md explains
the output.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aml_retriever.evaluation.cli import replay

if __name__ == "__main__":
    sys.exit(replay())
