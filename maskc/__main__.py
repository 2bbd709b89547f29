"""``python -m maskc``: the command-line interface."""

from maskc.cli.app import main

if __name__ == "__main__":
    main()
