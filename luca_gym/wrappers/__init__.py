"""Adapters over the session core: LLM tool calls (``llm``), an MCP server
(``mcp_server``). Imported on demand."""
