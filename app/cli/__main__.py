"""`python -m app.cli ...` runs the `hoprag` command."""

from app.cli import main

main()
