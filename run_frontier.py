"""python run_frontier.py --config crawl.yaml [--log-level ...] [--fresh [--yes]]: run (or resume) a crawl from a
checkout; the same code as `frontier crawl` (frontier.cli.supervisor, where the options are described).

The import is under the main guard: the spawn start method re-runs this file in every child (as __mp_main__),
and a child needs none of the supervisor.
"""

import sys

if __name__ == "__main__":
    from frontier.cli.supervisor import main

    sys.exit(main())
