"""Adapters that put our worlds where users already are: a gymnax-style
functional interface (:mod:`luca_gym.integrations.gymnax`) and an LLM-RL
framework's environment. Each translates a world's pure core and its tools;
none re-implements a rule or a scorer, and none is imported by the package
itself, so their optional dependencies stay optional."""
