"""`python -m localscheduler`: the demo (see localscheduler.demo)."""

import sys

from localscheduler.demo import main

sys.exit(main())
