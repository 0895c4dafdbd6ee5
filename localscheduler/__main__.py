"""`python -m localscheduler`: the demo (see localscheduler.demo)."""

import sys

from .demo import main

sys.exit(main())
