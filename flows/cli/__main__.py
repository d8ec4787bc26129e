"""`python -m flows.cli`: the paperlake command line."""

from flows.cli import main

main()
