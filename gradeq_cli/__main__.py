"""`python -m gradeq_cli` runs the `gradeq` command."""

from gradeq_cli.app import main

main()
