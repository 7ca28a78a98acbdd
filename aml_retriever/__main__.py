import sys

from aml_retriever.cli import main

sys.exit(main())
