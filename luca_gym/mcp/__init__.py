"""The MCP server: any world's tool session served over the Model Context Protocol."""
