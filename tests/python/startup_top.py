# SPDX-License-Identifier: MIT
"""startup_scenario.py written as most training scripts are: torch imported at the script's top.

Every spawn worker imports the main module again, so it imports torch before it unpickles its
arguments; so does every forkserver worker of a Python whose forkserver does not preload the main
module (before 3.13.8 and 3.14). Same arguments as startup_scenario.py.
"""

import torch  # noqa: F401  (at the top, as torchvision's reference scripts import it)

from startup_scenario import main

if __name__ == "__main__":
    main()
