# SPDX-License-Identifier: MIT
"""python -m lotus.mcp --root DIR [--root DIR ...] [--allow-capture]: the MCP server on stdio."""
import sys

from lotus.mcp.server import main

if __name__ == "__main__":
    sys.exit(main())
