"""The files OpenEnv's tooling expects of an environment, for a served System: ``cgym serve ENV_ID ...
--openenv-files DIR`` writes them, and ``openenv validate DIR`` passes on them (tested).

- ``openenv.yaml``: OpenEnv's manifest (``app: server.app:app``);
- ``pyproject.toml``: the ``server`` script (``server.app:main``), openenv-core and coalition-gym (from its
  source folder when cgym runs from one: no release of it is on a package index);
- ``uv.lock``: a placeholder, not a lock (OpenEnv's validation asks for the file; resolving needs a package
  index, which writing these files must not): ``uv lock`` in DIR replaces it;
- ``server/app.py``: the same app ``cgym serve`` runs, from the spec written into it, and ``main()``;
- ``server/Dockerfile``: OpenEnv's layout, installing coalition-gym from its own source (a named build context)
  and torch's CPU wheel. It is **not built or tested here** (Docker cannot run on the development machine; the
  tests check its content). It binds 0.0.0.0, so the container needs ``CGYM_SERVE_TOKEN``.

Each file's first line marks it as written here: running the command again replaces those, and refuses (unless
``overwrite``) to replace a file it did not write.
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

#: on the first line of every file written here (a comment in each file's language)
MARKER = "Written by `cgym serve --openenv-files`"
#: torch's CPU wheel the image installs first (the project's Makefile pins the same: a test compares them)
TORCH_CPU = "torch==2.13.0"
#: what of the project's source the image copies (what `pip install .` needs)
SOURCE_PARTS = ("pyproject.toml", "README.md", "coalition_gym", "coalition_gym_verifiers")

HEADER = "# " + MARKER + " (coalition-gym {version}): running it again replaces this file.\n"

APP = HEADER + '''"""The OpenEnv app of {env_id}: `uvicorn server.app:app`, `python -m server.app` or the
`server` script."""

import json
import os

from coalition_gym.envs.system import SystemSpec
from coalition_gym.integrations.openenv_server import build_app
from coalition_gym.integrations.serve_asgi import run_app
from coalition_gym.integrations.serve_options import ServeOptions

SPEC = json.loads({spec})
OPTIONS = json.loads({options})

# A container binds every interface: the server then requires ${token} (it refuses to start without it).
SERVE = ServeOptions(**{{**OPTIONS, "host": os.environ.get("HOST", OPTIONS["host"]),
                        "port": int(os.environ.get("PORT", OPTIONS["port"]))}})
app = build_app(SystemSpec(**SPEC), SERVE)


def main() -> None:
    """Serve the app on $HOST:$PORT (default: the options written here) until interrupted."""
    run_app(app, SERVE, ready=lambda url: print(f"serving {env_id} (OpenEnv) at {{url}}", flush=True))


if __name__ == "__main__":
    main()
'''

MANIFEST = HEADER + """spec_version: 1
name: {name}
version: {version}
type: space
runtime: fastapi
app: server.app:app
port: {port}
description: "coalition-gym {env_id}: the policy seat of a multi-LLM protocol; reward: the system's score"
"""

PYPROJECT = HEADER + """[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "openenv-{name}"
version = "{version}"
description = "coalition-gym {env_id} as an OpenEnv environment"
requires-python = ">=3.10"
dependencies = ["openenv-core==0.3.*", "{coalition_gym}"]

[project.scripts]
server = "server.app:main"

[tool.setuptools]
packages = ["server"]
"""

LOCK = HEADER + """# A placeholder, not a lock: OpenEnv's tooling expects this file, and pinning the
# dependencies needs a package index. Run `uv lock` in this folder to write the real one (it replaces this file).
version = 1
requires-python = ">=3.10"
"""

DOCKERFILE = HEADER + """# OpenEnv layout (server/Dockerfile). NOT BUILT OR TESTED by coalition-gym's suite:
# Docker cannot run on its development machine (the tests check this file's content only).
# coalition-gym is installed from its own source (no release of it is on a package index), given as the build
# context named coalition-gym (BuildKit, Docker 23+). From this folder:
#   docker build -f server/Dockerfile --build-context coalition-gym={source} -t {image} .
# The image serves {env_id} on every interface, so it requires a token:
#   docker run -e {token}=... -p {port}:{port} {image}
FROM python:3.11-slim
# torch's CPU wheel first, so that pip never pulls a CUDA build
RUN pip install --no-cache-dir "{torch}" --index-url https://download.pytorch.org/whl/cpu
WORKDIR /src/coalition-gym
{copies}
RUN pip install --no-cache-dir ".[serve]"
WORKDIR /app/env
COPY . /app/env
ENV HOST=0.0.0.0 PORT={port}
EXPOSE {port}
CMD ["python", "-m", "server.app"]
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


def project_source() -> Path | None:
    """The coalition-gym source folder this package runs from (an editable or source checkout), else None."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "coalition-gym"' in pyproject.read_text(errors="replace"):
        return root
    return None


def _written_here(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return MARKER in handle.readline()
    except OSError:  # a folder in its place, or unreadable: not ours
        return False


def refuse_foreign_files(paths: list[Path], overwrite: bool) -> None:
    """Refuse (a ConfigError naming it) a file among ``paths`` that exists and was not written here."""
    foreign = [p for p in paths if (p.exists() or p.is_symlink()) and not _written_here(p)]
    if foreign and not overwrite:
        raise ConfigError(f"--openenv-files: {foreign[0]} exists and was not written by cgym serve, so it is kept; "
                          "pass --overwrite to replace it, or choose another folder")


def openenv_texts(root: Path, spec: SystemSpec, options: ServeOptions,
                  source: Path | None = None) -> dict[Path, str]:
    """What :func:`write_openenv_files` writes, path -> text (``source``: the coalition-gym source folder)."""
    env_id = options.env_id or f"coalition_gym/{spec.protocol}"
    name = env_id.replace("/", "_").replace("-", "_").lower()
    kept = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name != "token"}
    values = {"env_id": env_id, "name": name, "version": __version__, "port": options.port or 8000,
              "token": TOKEN_VARIABLE, "torch": TORCH_CPU, "image": name.replace("_", "-"),
              "source": source or "PATH/TO/coalition-gym",
              "coalition_gym": f"coalition-gym[serve] @ {source.as_uri()}" if source else "coalition-gym[serve]",
              "copies": "\n".join(f"COPY --from=coalition-gym {part} ./{part}" for part in SOURCE_PARTS)}
    return {
        root / "openenv.yaml": MANIFEST.format(**values),
        root / "pyproject.toml": PYPROJECT.format(**values),
        root / "uv.lock": LOCK.format(**values),
        root / "server" / "__init__.py": HEADER.format(**values),
        root / "server" / "app.py": APP.format(spec=repr(json.dumps(spec_data(spec))),
                                               options=repr(json.dumps(kept)), **values),
        root / "server" / "Dockerfile": DOCKERFILE.format(**values),
    }


def write_openenv_files(folder: str | Path, spec: SystemSpec, options: ServeOptions, *,
                        overwrite: bool = False) -> list[Path]:
    """Write OpenEnv's files for ``spec`` served with ``options`` under ``folder`` (see the module doc); returns
    their paths. The token is never written (the app reads ``$CGYM_SERVE_TOKEN``). A file there that was not
    written by this function is refused, and every file kept, unless ``overwrite``."""
    files = openenv_texts(Path(folder), spec, options, project_source())
    refuse_foreign_files(list(files), overwrite)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)
    return list(files)
