"""`python -m gradeq.cli` runs the `gradeq` command."""

from gradeq.cli.app import main

main()
