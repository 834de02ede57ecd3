"""Credentials as the `computer` CLI finds them (clients/cli/src/config.ts): COMPUTER_API_KEY and
COMPUTER_BASE_URL override what `computer login` stored in $XDG_CONFIG_HOME/computer/config.json (else
~/.config/computer/config.json); the base URL defaults to http://127.0.0.1:8080."""
from __future__ import annotations

import json
import os
from pathlib import Path

DEFAULT_BASE_URL = "http://127.0.0.1:8080"


def config_path(env: dict[str, str]) -> Path:
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    return base / "computer" / "config.json"


def resolve(env: dict[str, str] | None = None) -> tuple[str, str]:
    """(base_url, api_key); raises LookupError when no key is set or stored."""
    e = dict(os.environ) if env is None else env
    stored: dict[str, object] = {}
    try:
        loaded = json.loads(config_path(e).read_text())
        if isinstance(loaded, dict):
            stored = loaded
    except (OSError, ValueError):
        pass
    key = e.get("COMPUTER_API_KEY") or stored.get("api_key")
    if not isinstance(key, str) or not key:
        raise LookupError("no API key: set COMPUTER_API_KEY or run `computer login`")
    url = e.get("COMPUTER_BASE_URL") or stored.get("base_url") or DEFAULT_BASE_URL
    return str(url), key
