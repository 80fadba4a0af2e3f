"""The verifiers adapter's arguments: an unknown setting is refused at once,
in one line naming it (before verifiers is imported or a row is built), and
a verifiers release without the API the adapter stands on (0.4 keeps only
``verifiers.v1``) is named in one line instead of failing inside it."""

from __future__ import annotations

import sys
import types

import pytest

from luca_gym.integrations.verifiers import load_environment


@pytest.mark.parametrize("world, settings, named", [
    ("dag", {"bogus": 1}, "setting 'bogus' unknown for world 'dag'; allowed "),
    ("luca", {"tier": "easy", "tiers": "easy", "zz": 0}, "settings 'tiers', 'zz' unknown for world 'luca'; allowed "),
    ("equation", {"n_variable": 2}, "setting 'n_variable' unknown for world 'equation'; allowed "),
])
def test_an_unknown_setting_is_refused_at_once_in_one_line_naming_it(monkeypatch, world, settings, named):
    monkeypatch.setitem(sys.modules, "verifiers", None)  # refused before verifiers is needed
    with pytest.raises(ValueError) as raised:
        load_environment(world, **settings)
    message = str(raised.value)
    assert message.startswith(named) and "\n" not in message
    assert "n_variables" in message if world == "equation" else True  # the allowed names, to fix a typo


def test_the_worlds_settings_and_session_options_are_accepted(monkeypatch):
    monkeypatch.setitem(sys.modules, "verifiers", None)  # got past the settings: verifiers is asked for
    for world, settings in [("dag", {"n_nodes": 3, "proposals": "every"}), ("luca", {"tier": "easy", "stance": "permit"})]:
        with pytest.raises(ImportError, match="verifiers is not installed"):
            load_environment(world, **settings)


def test_verifiers_0_4_without_the_api_is_named_in_one_line(monkeypatch):
    fake = types.ModuleType("verifiers")
    fake.__version__ = "0.4.0"
    fake.v1 = types.ModuleType("verifiers.v1")
    monkeypatch.setitem(sys.modules, "verifiers", fake)
    with pytest.raises(ImportError) as raised:
        load_environment("dag", num_examples=1)
    message = str(raised.value)
    assert message.startswith("verifiers 0.4.0 is installed; this adapter needs verifiers' MultiTurnEnv API")
    assert 'pip install "luca-gym[verifiers]"' in message and "\n" not in message


def test_verifiers_own_loader_passes_the_line_on():
    vf = pytest.importorskip("verifiers")
    if not hasattr(vf, "load_environment"):
        pytest.skip("this verifiers has no top-level load_environment")
    with pytest.raises(Exception) as raised:  # verifiers 0.2 wraps it in a RuntimeError naming the environment
        vf.load_environment("luca_gym.integrations.verifiers", world="dag", bogus=1)
    assert "setting 'bogus' unknown for world 'dag'" in str(raised.value)
    assert not isinstance(raised.value, TypeError)
