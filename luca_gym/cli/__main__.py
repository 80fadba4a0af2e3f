"""``python -m luca_gym.cli``: the ``luca-gym`` command (:func:`luca_gym.cli.main`)."""

import sys

from luca_gym.cli import main

if __name__ == "__main__":
    sys.exit(main())
