"""Entry point: `python -m services.bus --help`."""

from services.bus.cli import main

raise SystemExit(main())
