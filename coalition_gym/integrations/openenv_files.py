"""The files OpenEnv's tooling expects of an environment (``openenv.yaml``, the app module, a Dockerfile), for a
served System: ``cgym serve ENV_ID ... --openenv-files DIR`` writes them.

``server/app.py`` builds the same app ``cgym serve`` runs, from the spec written into it; ``openenv.yaml`` is
OpenEnv's manifest (``app: server.app:app``); the Dockerfile follows OpenEnv's layout (``server/Dockerfile``) and
is **not built or tested here** (the development machine has no Docker): it installs coalition-gym with its
``serve`` extra and binds 0.0.0.0, so the container needs ``CGYM_SERVE_TOKEN``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..envs.system import SystemSpec
from ..errors import ConfigError
from ..result_files import write_text
from ..version import __version__
from .serve_options import TOKEN_VARIABLE, ServeOptions

APP = '''"""The OpenEnv app of {env_id} (written by `cgym serve --openenv-files`): `uvicorn server.app:app`."""

import json
import os

from coalition_gym.envs.system import SystemSpec
from coalition_gym.integrations.openenv_server import ServeOptions, build_app

SPEC = json.loads({spec})
OPTIONS = json.loads({options})

# A container binds every interface: the server then requires ${token} (it refuses to start without it).
app = build_app(SystemSpec(**SPEC), ServeOptions(**{{**OPTIONS, "host": os.environ.get("HOST", OPTIONS["host"])}}))
'''

MANIFEST = """spec_version: 1
name: {name}
version: {version}
type: space
runtime: fastapi
app: server.app:app
port: {port}
description: "coalition-gym {env_id}: the policy seat of a multi-LLM protocol; reward: the system's score"
"""

DOCKERFILE = """# OpenEnv layout (server/Dockerfile). NOT BUILT OR TESTED by coalition-gym's suite (no Docker there).
# The image installs coalition-gym with its serve extra and serves {env_id} on every interface, so it
# requires a token: docker run -e {token}=... -p {port}:{port} IMAGE
FROM python:3.11-slim
WORKDIR /app/env
RUN pip install --no-cache-dir "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu \\
    && pip install --no-cache-dir "coalition-gym[serve]=={version}"
COPY . /app/env
ENV HOST=0.0.0.0
EXPOSE {port}
CMD ["uvicorn", "server.app:app", "--host", "0.0.0.0", "--port", "{port}"]
"""


def spec_data(spec: SystemSpec) -> dict[str, Any]:
    """A SystemSpec as plain JSON data (names, not objects: a spec holding a Protocol or Pool object is refused)."""
    data = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    data["members"] = list(data["members"]) if data["members"] is not None else None
    data["task_kwargs"] = dict(data["task_kwargs"] or {})
    data["protocol_settings"] = dict(data["protocol_settings"])
    try:
        json.dumps(data)
    except TypeError as exc:
        raise ConfigError(f"the served system must be named by plain values to write OpenEnv files: {exc}") from None
    return data


def write_openenv_files(folder: str | Path, spec: SystemSpec, options: ServeOptions) -> list[Path]:
    """Write ``openenv.yaml``, ``server/app.py``, ``server/__init__.py`` and ``server/Dockerfile`` under
    ``folder``; returns their paths. The token is never written (the app reads ``$CGYM_SERVE_TOKEN``)."""
    root = Path(folder)
    env_id = options.env_id or f"coalition_gym/{spec.protocol}"
    kept = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name != "token"}
    values = {"env_id": env_id, "name": env_id.replace("/", "_").replace("-", "_").lower(), "version": __version__,
              "port": options.port or 8000, "token": TOKEN_VARIABLE}
    files = {
        root / "openenv.yaml": MANIFEST.format(**values),
        root / "server" / "__init__.py": "",
        root / "server" / "app.py": APP.format(spec=repr(json.dumps(spec_data(spec))),
                                               options=repr(json.dumps(kept)), **values),
        root / "server" / "Dockerfile": DOCKERFILE.format(**values),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)
    return list(files)
