"""The evaluation harness, split by job:

* :mod:`~luca_gym.harness.spec` -- :class:`SessionSpec`, the key fields, :func:`plan`;
* :mod:`~luca_gym.harness.agents` -- agents by name, :func:`make_runner`, prices;
* :mod:`~luca_gym.harness.runner` -- one session: :func:`run_session`, :func:`run_tool_session`;
* :mod:`~luca_gym.harness.results` -- the results file (digest, signature, lock);
* :mod:`~luca_gym.harness.sweep` -- resumable, concurrent :func:`sweep`;
* :mod:`~luca_gym.harness.tables` -- summaries and LUCA's paper-format tables.

A sweep runs agents x settings x seeds; each session is appended to
``<out>/sessions.jsonl`` as one JSON line the moment it ends. Run the same
sweep again and it resumes: a session already on file is skipped.
(Formerly ``luca_gym.eval``, kept as a deprecated alias for one release.)
"""
from luca_gym.harness.spec import (  # noqa: F401
    luca_spec,
    plan_world,
    record_key,
    KEY_FIELDS,
    KEY_DEFAULTS,
    REQUIRED_KEY_FIELDS,
    SCORE_FIELDS,
    STRATEGY_FIELDS,
    ResultsError,
    SessionSpec,
    plan,
    expected_fields,
)
from luca_gym.harness.agents import (  # noqa: F401
    AGENTS_ALLOWED,
    RL_EXTRA,
    check_price,
    session_cost,
    is_llm_agent,
    is_learned_agent,
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
)
from luca_gym.harness.sweep import (  # noqa: F401
    sweep,
    check_concurrency,
)
from luca_gym.harness.tables import (  # noqa: F401
    world_table,
    PAPER_COMPOSITE,
    PAPER_SCALING,
    group,
    summary,
    agents_in,
    composite_table,
    disease_table,
    strategy_table,
    scaling_table,
)

__all__ = [
    "AGENTS_ALLOWED",
    "CONFIG_FIELDS",
    "KEY_DEFAULTS",
    "KEY_FIELDS",
    "PAPER_COMPOSITE",
    "PAPER_SCALING",
    "REQUIRED_KEY_FIELDS",
    "RL_EXTRA",
    "Results",
    "ResultsError",
    "ResultsWarning",
    "SCORE_FIELDS",
    "SESSIONS_FILE",
    "STRATEGY_FIELDS",
    "SessionSpec",
    "agents_in",
    "append_record",
    "check_agent",
    "check_concurrency",
    "check_price",
    "check_recordable",
    "check_recordable_spec",
    "composite_table",
    "describe_key",
    "disease_table",
    "expected_fields",
    "folder_lock",
    "group",
    "is_learned_agent",
    "is_llm_agent",
    "load_sessions",
    "luca_spec",
    "make_runner",
    "open_tool_session",
    "plan",
    "plan_world",
    "read_results",
    "record_key",
    "record_tool_session",
    "run_config",
    "run_session",
    "run_tool_session",
    "scaling_table",
    "session_cost",
    "strategy_table",
    "summary",
    "sweep",
    "trim_unfinished",
    "world_table",
]
