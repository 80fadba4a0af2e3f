"""The evaluation harness, split by job:

* :mod:`~luca_gym.harness.spec` -- :func:`plan_world`, :func:`record_key`,
  :func:`run_options` (settings a sweep takes once, e.g. a budget);
* :mod:`~luca_gym.harness.agents` -- agents by name, :func:`make_runner`, prices;
* :mod:`~luca_gym.harness.runner` -- one session: :func:`run_session`, :func:`run_tool_session`;
* :mod:`~luca_gym.harness.results` -- the results file (digest, signature, lock);
* :mod:`~luca_gym.harness.sweep` -- resumable, concurrent :func:`sweep`;
* :mod:`~luca_gym.harness.tables` -- summaries by agent and settings.

It names no world: it reaches each through the registry and the world's
:class:`~luca_gym.protocol.World` entries (its policy runner, tool session,
baselines, expected record fields). LUCA's key field names, ``luca_spec`` and
paper tables are the world's (:mod:`luca_gym.worlds.luca.evaluation`,
:mod:`luca_gym.worlds.luca.tables`).

A sweep runs agents x settings x seeds; each session is appended to
``<out>/sessions.jsonl`` as one JSON line the moment it ends. Run the same
sweep again and it resumes: a session already on file is skipped.
"""
from luca_gym.protocol import SessionSpec  # noqa: F401
from luca_gym.harness.spec import (  # noqa: F401
    LEGACY_WORLD,
    complete_settings,
    plan_world,
    record_key,
    session_key,
    run_options,
    ResultsError,
    expected_fields,
)
from luca_gym.harness.agents import (  # noqa: F401
    RL_EXTRA,
    check_price,
    session_cost,
    is_llm_agent,
    is_learned_agent,
    is_module_agent,
    agents_allowed,
    check_agent,
    make_runner,
)
from luca_gym.harness.results import (  # noqa: F401
    SESSIONS_FILE,
    CONFIG_FIELDS,
    run_config,
    append_record,
    describe_key,
    Results,
    read_results,
    load_sessions,
    ResultsWarning,
    folder_lock,
    trim_unfinished,
)
from luca_gym.harness.runner import (  # noqa: F401
    open_tool_session,
    run_session,
    run_tool_session,
    record_tool_session,
    check_recordable,
    check_recordable_spec,
    session_spec,
)
from luca_gym.harness.sweep import (  # noqa: F401
    sweep,
    check_concurrency,
    check_python,
)
from luca_gym.harness.tables import (  # noqa: F401
    world_table,
    group,
    agents_in,
)

__all__ = [
    "CONFIG_FIELDS",
    "LEGACY_WORLD",
    "RL_EXTRA",
    "Results",
    "ResultsError",
    "ResultsWarning",
    "SESSIONS_FILE",
    "SessionSpec",
    "agents_allowed",
    "agents_in",
    "append_record",
    "check_agent",
    "check_concurrency",
    "check_price",
    "check_python",
    "check_recordable",
    "check_recordable_spec",
    "complete_settings",
    "describe_key",
    "expected_fields",
    "folder_lock",
    "group",
    "is_learned_agent",
    "is_llm_agent",
    "is_module_agent",
    "load_sessions",
    "make_runner",
    "open_tool_session",
    "plan_world",
    "read_results",
    "record_key",
    "session_key",
    "record_tool_session",
    "run_config",
    "run_options",
    "run_session",
    "run_tool_session",
    "session_spec",
    "session_cost",
    "sweep",
    "trim_unfinished",
    "world_table",
]
