"""`python3 -m aml_retriever.cluster ...` (what scripts/cluster.sh runs): the cluster's commands."""

import sys

from aml_retriever.cluster.control import main

sys.exit(main())
