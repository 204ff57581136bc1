"""How ``cgym serve`` serves a System: :class:`ServeOptions` (bounds and defaults declared once, read by the
command line) and :class:`ServeError`. No OpenEnv import here: the command line reads it without the serve extra."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from ..errors import CoalitionGymError, ConfigError
from ..settings_check import check_settings, setting
from ..tasks.base import PROMPT_STYLES

TOKEN_VARIABLE = "CGYM_SERVE_TOKEN"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass
class ServeOptions:
    """How ``cgym serve`` serves a System (the System itself is a :class:`~coalition_gym.envs.system.SystemSpec`)."""

    host: str = setting("127.0.0.1", doc="interface to bind; another than 127.0.0.1 requires a token")
    port: int = setting(8000, ge=0, le=65535, doc="TCP port (0: any free port)")
    token: Optional[str] = setting(None, doc=f"bearer token clients must send (default: ${TOKEN_VARIABLE})")
    max_sessions: int = setting(64, ge=1, le=4096, doc="concurrent WebSocket sessions at most")
    idle_timeout_s: float = setting(600.0, gt=0, doc="a session idle this long is reclaimed")
    max_body_bytes: int = setting(1 << 20, ge=1024, doc="largest request body or WebSocket message")
    max_action_chars: int = setting(1 << 16, ge=1, doc="longest reply the seat may send")
    policy_name: str = setting("policy", doc="the seat's name in the coalition")
    policy_style: str = setting("chat", choices=PROMPT_STYLES, doc="the seat's prompt style")
    env_id: str = setting("", doc="the env id served (names the environment in /metadata)")
    report_every_s: float = setting(60.0, ge=0, doc="seconds between the console's load lines (sessions open, "
                                    "episodes/s, steps/s, mean batch size per backend; 0: none)")
    batch_wait_ms: float = setting(250.0, ge=0, le=10000, doc="longest a batch of member requests waits for the "
                                   "other open sessions' requests (never more than half a recent wave's time in local "
                                   "models; none for remote or simulated members; 0: send what is there)")
    model_process: str = setting("off", choices=("auto", "off"), doc="off: local models answer in the server's "
                                 "process; auto: local models on the CPU (hf backends loaded from a folder) answer "
                                 "from a process of their own, beside the one that talks to the clients (slower at "
                                 "64 zoo sessions on 2 cores: docs/serve/openenv.md)")

    def __post_init__(self) -> None:
        check_settings(self, "serve options")
        if self.token is None:
            self.token = os.environ.get(TOKEN_VARIABLE) or None
        if self.host not in LOCAL_HOSTS and not self.token:
            raise ConfigError(f"--host {self.host} is not local: clients anywhere could drive this server; pass "
                              f"--token TOKEN (or set ${TOKEN_VARIABLE}) to require one, or bind 127.0.0.1")


class ServeError(CoalitionGymError):
    """A request the server refuses: ``status`` is the HTTP status it answers with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
