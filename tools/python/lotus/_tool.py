# SPDX-License-Identifier: MIT
"""The `lotus-tool` console script of a pip-installed lotus: runs the lotus-tool binary built with
the package (lotus/bin/lotus-tool)."""
import os
import sys


def bundled():
    """Path of the lotus-tool binary installed with this package, or None."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "lotus-tool")
    return path if os.access(path, os.X_OK) else None


def main():
    exe = bundled()
    if exe is None:
        sys.stderr.write("lotus-tool: this lotus package was installed without lotus-tool "
                         "(LOTUS_BUILD_TOOL=0); reinstall it with the tool, or build it with CMake\n")
        return 2
    os.execv(exe, [exe] + sys.argv[1:])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
