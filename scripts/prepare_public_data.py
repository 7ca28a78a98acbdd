#!/usr/bin/env python3
"""Convert public LoCoMo / LongMemEval files into replay files (nothing is downloaded).

Runs from a checkout without installation; `--help` lists the options and docs/EVAL.md explains
the output.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aml_retriever.evaluation.cli import prepare

if __name__ == "__main__":
    sys.exit(prepare())
