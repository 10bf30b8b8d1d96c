"""``python -m openenv_gym`` is the ``openenv-gym`` command."""

import sys

from openenv_gym.cli import main

sys.exit(main())
