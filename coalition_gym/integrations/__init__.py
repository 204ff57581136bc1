"""Environments as services: the integration layer above the envs (an OpenEnv server, a verifiers environment)."""
