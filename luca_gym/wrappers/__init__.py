"""Adapters over the session core: LLM tool calls (``llm``), an MCP server
(``mcp_server``), an OpenAI-compatible fake provider for runs without a
network (``mock_provider``). Imported on demand."""
