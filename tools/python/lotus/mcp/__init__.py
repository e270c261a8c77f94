# SPDX-License-Identifier: MIT
"""lotus for coding agents: an MCP server (stdio) over lotus-tool's answers.

    python -m lotus.mcp --root DIR [--root DIR ...] [--allow-capture]

Tools: ``diagnose`` (``lotus-tool report --json``), ``predict`` (``lotus-tool whatif --json``),
``compare`` (``lotus-tool diff --json``), ``live`` (``lotus-tool top --once``), ``capture``
(``lotus-tool capture``, only with ``--allow-capture``) and ``explain`` (a finding's rule from
tools/docs/FINDINGS.md); the trace directories under the roots as resources; a prompt that walks
diagnose, predict and compare. Every answer is lotus-tool's own, parsed: the server analyses
nothing itself. Only directories inside the roots are read (symlinks resolved, ``..`` refused),
no user code runs, every argument is bounded. Needs the SDK: ``pip install 'lotus-trace[mcp]'``.
See tools/docs/MCP.md.
"""
