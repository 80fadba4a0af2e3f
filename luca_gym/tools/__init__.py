"""The tool layer every world shares, for language-model agents.

* :mod:`~luca_gym.tools.session` -- :class:`~luca_gym.tools.session.ToolSessionBase`,
  the one dispatcher over a world's tool specs (parsing, schema checks,
  refusals that never raise, the transcript; OpenAI, Anthropic and MCP formats).
* :mod:`~luca_gym.tools.table` -- :class:`~luca_gym.tools.table.TableToolSession`,
  a tool session over a world's pure core from a table of typed handlers
  (schemas built from the signatures; refusals, rewards, ending and scores
  done once).
* :mod:`~luca_gym.llm.loop` -- :func:`~luca_gym.llm.loop.run_agent` with
  retries and token accounting; scripted and replay agents.
* :mod:`~luca_gym.llm.providers` -- OpenAI-compatible and Anthropic models
  (the ``llm`` extra).
* :mod:`~luca_gym.llm.mock` -- an OpenAI-shaped fake for runs
  without a network.
* :mod:`~luca_gym.mcp.server` -- any world's tools over MCP (stdio).
* :mod:`~luca_gym.tools.schema` -- the JSON Schema subset the tools publish,
  checked without a dependency.

A world's own tools (names, schemas, prompt, what a call does) live in its
folder, e.g. :mod:`luca_gym.worlds.luca.tools`.
"""
