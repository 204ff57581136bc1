"""Environments as services: a protocol's policy seat served over the wire.

``openenv_server``: an OpenEnv environment server (``cgym serve``) over the same System and episode machinery the
in-process environments use (``serve_options``: its options, readable without OpenEnv; ``openenv_files``: the
files OpenEnv's tooling expects); ``openenv_client``: driving it from a trainer (OpenEnv's own client, with clear
errors when the server is gone); ``openenv_rollout``: TRL's ``GRPOTrainer`` training the seat over the wire;
``processes``: a server as a child process or a thread (examples, tests, benchmarks); ``verifiers``: a verifiers
environment (``load_environment``). Every one of them drives its episodes through
:class:`~coalition_gym.training.seat_driver.SeatDriver`.
They need the ``serve`` extra (``pip install 'coalition-gym[serve]'``); nothing here is imported by the package
root.
"""
