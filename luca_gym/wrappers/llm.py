"""Deprecated: split into the generic tool layer (:mod:`luca_gym.tools`:
``session``, ``loop``, ``providers``) and LUCA's tools
(:mod:`luca_gym.worlds.luca.tools`). The public names stay importable from
here for one release."""

import warnings

from luca_gym.tools.loop import (  # noqa: F401
    BACKOFF_S, MAX_BACKOFF_S, RETRIES, Agent, AgentTurn, ProviderError, ReplayAgent, ScriptedAgent, ToolCall,
    backoff_delay, check_retry, run_agent,
)
from luca_gym.tools.providers import (  # noqa: F401
    LLM_EXTRA, RETRYABLE_STATUS, AnthropicAgent, OpenAIChatAgent, is_retryable, make_agent, provider_errors,
)
from luca_gym.tools.session import MAX_PAYLOAD, to_anthropic_tools, to_openai_tools  # noqa: F401
from luca_gym.worlds.luca.tools import (  # noqa: F401
    MAX_HYPOTHESES, MAX_HYPOTHESIS, TOOL_NAMES, TOOLS, Tool, ToolSession, system_prompt,
)

warnings.warn("luca_gym.wrappers.llm is deprecated and will be removed in the next release; import luca_gym.tools "
              "(session, loop, providers) and luca_gym.worlds.luca.tools", DeprecationWarning, stacklevel=2)
