"""Training: one registry of recipes (:mod:`.recipes`), policy training (C-RL and its baselines:
:mod:`.trainer`) and coalition training (:mod:`.collaborative`). Importing the package registers the
built-in recipes."""

from . import builtin_recipes  # noqa: F401  # registers the built-in recipes
