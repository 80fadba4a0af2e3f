"""``luca-gym mcp``: one LUCA session's tools over MCP (stdio), with the
official ``mcp`` SDK. The tools, their schemas and every answer come from
:class:`~luca_gym.wrappers.llm.ToolSession`; this module only carries them."""

from __future__ import annotations

import json

from luca_gym.wrappers.llm import ToolSession


def build_server(session: ToolSession):
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx, params):
        return types.ListToolsResult(
            tools=[types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"]) for t in session.tools_mcp()]
        )

    async def call_tool(ctx, params):
        result = session.call(params.name, params.arguments or {})
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result))],
            is_error="error" in result,
        )

    from luca_gym import __version__

    return Server("luca-gym", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)


def serve(session: ToolSession) -> None:
    """Serve ``session`` over stdio until the client disconnects."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(session)

    async def main():
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
