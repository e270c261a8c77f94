# SPDX-License-Identifier: MIT
"""python -m lotus.mcp --root DIR [--root DIR ...] [--allow-capture]: the MCP server on stdio."""
import sys

try:
    from lotus.mcp.server import main
except ImportError as e:
    if "MCP Python SDK" not in str(e):
        raise
    sys.stderr.write(f"python -m lotus.mcp: {e}\n")
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
