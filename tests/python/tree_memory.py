# SPDX-License-Identifier: MIT
"""The process tree's memory as the memory scenarios measure it (the truth whatif is held to):
a process's Pss (/proc/<pid>/smaps_rollup), its children, and the tree's summed Pss."""
import os


def pss(pid):
    """Process `pid`'s proportional set size in bytes (0 where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children(pid):
    """The pids of process `pid`'s children (every thread's)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def tree_pss(pid=None):
    """The summed Pss of process `pid` (default: this one) and its children."""
    me = os.getpid() if pid is None else pid
    return sum(pss(p) for p in [me] + children(me))
