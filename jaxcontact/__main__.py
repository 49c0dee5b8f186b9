"""`python -m jaxcontact ...`: the `jaxcontact` command (`jaxcontact.cli`)."""

import sys

from jaxcontact.cli import main

if __name__ == "__main__":
    sys.exit(main())
