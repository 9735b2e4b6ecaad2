"""Entry point: `python -m localcloud.pubsub --help`."""

from localcloud.pubsub.cli import main

raise SystemExit(main())
