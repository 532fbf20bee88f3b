"""Where maxkernel-tui keeps its files, and its settings. Stdlib only; no jax, no Textual.

Settings come from, in increasing priority: the defaults, a TOML file in the user config
directory (`MAXKERNEL_TUI_CONFIG`, else `$XDG_CONFIG_HOME/maxkernel-tui/config.toml`, else
`~/.config/maxkernel-tui/config.toml`), environment variables `MAXKERNEL_TUI_<NAME>`, and command
line flags. `SPECS` is the one table of settings: name, type (its parser), variable, flag, help;
every command's setting flags are made from it. Each value remembers where it came from
(`Settings.source(name)`).

API keys are read only from the environment (`SECRET_VARIABLES`), never from or into the file,
and never shown: `secret_status()` says "set" or "not set".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from maxkernel_tui.config_roles import RoleSettings, parse_roles, role_words

APP_NAME = "maxkernel-tui"
ENV_PREFIX = "MAXKERNEL_TUI_"
PROVIDERS = ("builtin", "gemini", "openai", "replay")  # builtin: the offline agent, no network
DEFAULT_TPU_TARGET = "v5e"  # kernels.targets.DEFAULT_TARGET; kept here so settings import nothing

# Credentials: environment only. The Gemini client reads the first two; an OpenAI-compatible
# server may want the third.
SECRET_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY")
# Not secret, shown as they are: how the Gemini client reaches Vertex AI or another endpoint.
VERTEX_VARIABLES = ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION")
GEMINI_BASE_URL_VARIABLE = "GOOGLE_GEMINI_BASE_URL"


class SourceKind(StrEnum):
    """Where a setting's value came from, lowest priority first."""

    DEFAULT = "default"
    FILE = "file"
    ENV = "env"
    FLAG = "flag"


DEFAULT, FILE, ENV, FLAG = SourceKind


def cache_dir() -> Path:
    """MAXKERNEL_TUI_CACHE_DIR, else $XDG_CACHE_HOME/maxkernel-tui, else ~/.cache/maxkernel-tui."""
    explicit = os.environ.get("MAXKERNEL_TUI_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / APP_NAME


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """MAXKERNEL_TUI_CONFIG, else $XDG_CONFIG_HOME/maxkernel-tui/config.toml, else ~/.config/..."""
    env = os.environ if env is None else env
    if explicit := env.get("MAXKERNEL_TUI_CONFIG"):
        return Path(explicit).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / APP_NAME / "config.toml"


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_DATA_HOME/maxkernel-tui, else ~/.local/share/maxkernel-tui."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / APP_NAME


class ConfigError(Exception):
    """A setting has a value it cannot have; the message names where it came from."""


# -- parsers: from a TOML value, an environment string or a flag string ---------------------


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty string")
    return value.strip()


def _provider(value: Any) -> str:
    name = _text(value).lower()
    if name not in PROVIDERS:
        raise ValueError(f"expected one of {', '.join(PROVIDERS)}")
    return name


def _url(value: Any) -> str:
    url = _text(value).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// URL")
    return url


def _positive_int(value: Any) -> int:
    if isinstance(value, str):
        value = value.replace("_", "").strip()
        if not value.isdigit():
            raise ValueError("expected a whole number")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError("expected a whole number above 0")
    return value


def _positive_float(value: Any) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip().lstrip("$"))
        except ValueError:
            raise ValueError("expected a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError("expected a number above 0")
    return float(value)


def _target(value: Any) -> str:
    return _text(value).lower()


def _on_off(value: Any) -> str:
    chosen = _text(value).lower()
    if chosen not in ("on", "off"):
        raise ValueError("expected on or off")
    return chosen


def _ray_address(value: Any) -> str:
    """`local`, or HOST:PORT of a Ray cluster's head."""
    address = _text(value)
    host, _, port = address.rpartition(":")
    if address != "local" and not (host and port.isdigit()):
        raise ValueError("expected HOST:PORT of the Ray head node, or local")
    return address


def _path(value: Any) -> Path:
    return Path(_text(value)).expanduser()


def _prices(value: Any) -> dict[str, dict[str, float]]:
    """{model: {"input": $ per million tokens, "output": $ per million tokens}}."""
    if not isinstance(value, Mapping):
        raise ValueError('expected a table of models, e.g. [prices."gemini-2.5-pro"] input = 1.25')
    prices = {}
    for model, entry in value.items():
        if not isinstance(entry, Mapping) or set(entry) - {"input", "output"} or not entry:
            raise ValueError(f"{model}: expected input and output dollars per million tokens")
        prices[model] = {k: float(_non_negative(v, f"{model}.{k}")) for k, v in entry.items()}
    return prices


def _non_negative(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{name}: expected a number of dollars, 0 or more")
    return value


@dataclass(frozen=True)
class Spec:
    """One setting: its name in the file, how to read it, the placeholder and the one flag that
    set it on a command line, its help (`{scope}` is what a budget caps), and what an unset value
    shows. The environment variable is `MAXKERNEL_TUI_<NAME>` where `env` allows one;
    `flag=None` means the file only."""

    name: str
    parse: Callable[[Any], Any]
    metavar: str
    flag: str | None
    help: str
    unset: str = "(none)"
    env: bool = True
    # Older spellings of the flag, still read (hidden from --help) so that command lines written
    # before flags were unified keep working.
    aliases: tuple[str, ...] = ()
    table: str | None = None  # the TOML table that holds it in the file (None: top level)

    @property
    def env_name(self) -> str:
        return ENV_PREFIX + self.name.upper()


NO_CAP = "no cap"
SPECS: tuple[Spec, ...] = (
    Spec(
        "provider",
        _provider,
        "NAME",
        "--provider",
        f"LLM provider: {', '.join(PROVIDERS)} (builtin: the offline agent)",
    ),
    Spec(
        "model",
        _text,
        "MODEL",
        "--model",
        "model name for the provider (default: the provider's own)",
        unset="(the provider's default)",
    ),
    Spec(
        "base_url",
        _url,
        "URL",
        "--base-url",
        "base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp)",
    ),
    Spec(
        "budget_tokens",
        _positive_int,
        "N",
        "--budget-tokens",
        "hard cap on tokens per {scope} (default: no cap)",
        unset=NO_CAP,
    ),
    Spec(
        "budget_dollars",
        _positive_float,
        "X",
        "--budget-usd",
        "hard cap on dollars per {scope} (default: no cap)",
        unset=NO_CAP,
        aliases=("--budget-dollars",),
    ),
    Spec(
        "tpu_target",
        _target,
        "GEN",
        "--tpu",
        "TPU generation to compile and estimate for: v5e, v6e, v4, v5p",
        aliases=("--tpu-target",),
    ),
    Spec("data_dir", _path, "DIR", "--data-dir", "where the session store lives"),
    # Checked against the registered themes by the app, which knows them (no Textual here).
    Spec(
        "theme",
        _text,
        "THEME",
        "--theme",
        "colour theme of the TUI: maxkernel-ansi (default), maxkernel-dark, maxkernel-light "
        "or a Textual theme",
        unset="(the default theme)",
    ),
    Spec(
        "ray",
        _ray_address,
        "ADDRESS",
        "--ray",
        "run evaluations on a Ray cluster: HOST:PORT of its head, or local for a private one on "
        "this machine (default: this machine's worker pool)",
        unset="(local worker pool)",
        table="executor",
    ),
    Spec(
        "sandbox",
        _on_off,
        "on|off",
        "--sandbox",
        "off: run kernels, task code and imported modules even where this machine lacks a "
        "sandbox layer (`doctor` lists them; every report then says so). Default on: refuse",
        unset="on",
    ),
    Spec(
        "prices",
        _prices,
        "",
        None,
        "per-model prices, $ per million tokens (config file only)",
        unset="(built-in prices)",
        env=False,
    ),
    Spec(
        "roles",
        parse_roles,
        "",
        None,
        "per sub-agent: model, tools and tool calls per step (config file only)",
        unset="(every role: the session's model and its default tools)",
        env=False,
    ),
)
SPEC_BY_NAME = {spec.name: spec for spec in SPECS}
_TABLES: dict[str, set[str]] = {}
for _spec in SPECS:
    if _spec.table is not None:
        _TABLES.setdefault(_spec.table, set()).add(_spec.name)


def flag_of(name: str) -> str:
    """The one flag of a setting, for a command that declares it with its own default and help
    (`eval --tpu`)."""
    flag = SPEC_BY_NAME[name].flag
    assert flag is not None, f"{name} has no flag"
    return flag


@dataclass(frozen=True)
class Source:
    kind: SourceKind
    where: str = ""  # the file, the variable or the flag

    def __str__(self) -> str:
        return self.kind if not self.where else f"{self.kind} ({self.where})"


@dataclass(frozen=True)
class Settings:
    provider: str = "builtin"
    model: str | None = None
    base_url: str | None = None
    budget_tokens: int | None = None
    budget_dollars: float | None = None
    tpu_target: str = DEFAULT_TPU_TARGET
    data_dir: Path = field(default_factory=default_data_dir)
    theme: str | None = None  # None: the app's default theme
    ray: str | None = None  # a Ray cluster's head (HOST:PORT) or "local"; None: the local pool
    sandbox: str = "on"  # "off": untrusted code runs where a sandbox layer is missing
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    roles: dict[str, RoleSettings] = field(default_factory=dict)
    config_file: Path = field(default_factory=config_path)
    sources: dict[str, Source] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def source(self, name: str) -> Source:
        return self.sources.get(name, Source(DEFAULT))

    def role_model(self, role: str) -> str | None:
        """The model `role` asks: its own, else the session's (None: the provider's default)."""
        own = self.roles.get(role)
        return own.model if own is not None and own.model else self.model

    @property
    def store_path(self) -> Path:
        return self.data_dir / "sessions.db"


def _looks_secret(name: str) -> bool:
    lowered = name.lower().replace("-", "_")
    return any(word in lowered for word in ("key", "token", "secret", "password", "credential"))


def read_file(path: Path) -> tuple[dict[str, Any], list[str]]:
    """The known settings in a config file and warnings about the rest; {} when it is absent."""
    if not path.is_file():
        return {}, []
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    values: dict[str, Any] = {}
    warnings: list[str] = []
    for name, value in _flatten_tables(data, path, warnings).items():
        if name in SPEC_BY_NAME:
            values[name] = value
        elif _looks_secret(name):
            warnings.append(
                f"{path}: {name!r} ignored: API keys are read only from the environment "
                f"({', '.join(SECRET_VARIABLES)}), never from this file"
            )
        else:
            warnings.append(
                f"{path}: unknown setting {name!r} ignored (known: {', '.join(SPEC_BY_NAME)})"
            )
    return values, warnings


def _flatten_tables(data: dict[str, Any], path: Path, warnings: list[str]) -> dict[str, Any]:
    """The file's settings by name: top-level ones, and those of their tables ([executor])."""
    flat = {k: v for k, v in data.items() if k not in _TABLES}
    for table, names in _TABLES.items():
        entries = data.get(table, {})
        if not isinstance(entries, dict):
            warnings.append(f"{path}: {table!r} should be a table ([{table}]); ignored")
            continue
        for name, value in entries.items():
            if name in names:
                flat[name] = value
            else:
                warnings.append(f"{path}: unknown setting {name!r} in [{table}] ignored")
    return flat


def load_settings(
    flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Defaults < config file < MAXKERNEL_TUI_* variables < flags (None means a flag not given)."""
    env = os.environ if env is None else env
    path = config_path(env)
    from_file, warnings = read_file(path)
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for spec in SPECS:
        layers = [(from_file.get(spec.name), Source(FILE, str(path)))]
        if spec.env:
            layers.append((env.get(spec.env_name) or None, Source(ENV, spec.env_name)))
        if spec.flag and flags is not None:
            layers.append((flags.get(spec.name), Source(FLAG, spec.flag)))
        for raw, source in layers:
            if raw is None:
                continue
            try:
                values[spec.name] = spec.parse(raw)
            except ValueError as error:
                raise ConfigError(f"{spec.name} from {source}: {error} (got {raw!r})") from None
            if (
                spec.name == "data_dir"
                and source.kind == FILE
                and not values[spec.name].is_absolute()
            ):
                values[spec.name] = path.parent / values[spec.name]  # relative to the config file
            sources[spec.name] = source
    values.setdefault("data_dir", default_data_dir(env))
    return Settings(**values, config_file=path, sources=sources, warnings=tuple(warnings))


def secret_status(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """ "set" or "not set" for each credential variable: their values are never shown."""
    env = os.environ if env is None else env
    return {name: "set" if env.get(name) else "not set" for name in SECRET_VARIABLES}


def add_settings_flags(
    parser: argparse.ArgumentParser, names: tuple[str, ...] | None = None, scope: str = "session"
) -> None:
    """The flag of each setting a flag may set (all of them by default), from `SPECS`; `scope`
    names what a budget caps ("session", "search")."""
    for spec in SPECS:
        if spec.flag is None or (names is not None and spec.name not in names):
            continue
        help = spec.help.format(scope=scope)
        where = f" [env {spec.env_name}]" if spec.env else ""
        parser.add_argument(
            spec.flag, dest=spec.name, default=None, metavar=spec.metavar, help=help + where
        )
        for alias in spec.aliases:
            parser.add_argument(alias, dest=spec.name, default=None, help=argparse.SUPPRESS)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The settings with the flags of `add_settings_flags` on top (a flag not added counts as not
    given)."""
    return load_settings({spec.name: getattr(args, spec.name, None) for spec in SPECS if spec.flag})


def display_value(name: str, value: Any) -> str:
    """A setting's value as `config` and the settings screen show it."""
    if value is None:
        return SPEC_BY_NAME[name].unset
    if name == "prices":
        shown = (
            f"{model}: ${price.get('input', 0):g}/${price.get('output', 0):g} per Mtok"
            for model, price in value.items()
        )
        return ", ".join(shown) or SPEC_BY_NAME[name].unset
    if name == "roles":
        return "; ".join(role_words(role, own) for role, own in value.items()) or (
            SPEC_BY_NAME[name].unset
        )
    if name == "budget_dollars":
        return f"${value:g}"
    if name == "base_url":
        return mask_url(value)
    return str(value)


def mask_url(url: str) -> str:
    """A URL with any password in it (`https://user:pass@host`) hidden."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


# -- writing the config file ------------------------------------------------------------------


def validate_settings(values: Mapping[str, Any]) -> dict[str, str]:
    """Errors by setting name for the values that the file may not hold; {} when all are valid.
    None means "unset" and is always valid."""
    errors = {}
    for name, value in values.items():
        spec = SPEC_BY_NAME.get(name)
        if spec is None:
            errors[name] = "unknown setting"
            continue
        if value is None:
            continue
        try:
            spec.parse(value)
        except ValueError as error:
            errors[name] = str(error)
    return errors


def save_settings(values: Mapping[str, Any], path: Path | None = None) -> Path:
    """Set top-level settings in the TOML config file (None removes one), keeping every other line
    and comment as it was. Nothing is written unless every value is valid (ConfigError otherwise).

    The file is edited line by line rather than re-serialised: it is the user's, with their
    comments and layout. The result is parsed back and compared before it replaces the file."""
    path = config_path() if path is None else path
    errors = validate_settings(values)
    if errors:
        raise ConfigError("; ".join(f"{name}: {message}" for name, message in errors.items()))
    parsed = {
        name: None if v is None else SPEC_BY_NAME[name].parse(v) for name, v in values.items()
    }
    wanted = {name: str(v) if isinstance(v, Path) else v for name, v in parsed.items()}
    old_text = path.read_text() if path.is_file() else ""
    old, _ = read_file(
        path
    )  # raises on a file that is not TOML: never overwrite what we cannot read
    lines = old_text.splitlines()
    for name, value in wanted.items():
        line = None if value is None else f"{name} = {_toml_value(value)}"
        table = SPEC_BY_NAME[name].table
        if table is None:
            lines = _set_top_level(lines, name, line)
        else:
            lines = _set_in_table(lines, table, name, line)
    new_text = "\n".join(lines) + "\n"
    result = _flatten_tables(tomllib.loads(new_text), path, [])
    expected = {k: v for k, v in (old | wanted).items() if v is not None}
    if {k: result.get(k) for k in expected} != expected or set(result) - set(expected) - set(old):
        raise ConfigError(
            f"{path}: cannot edit this file safely (a multi-line value?); edit it by hand"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(new_text)
    os.replace(temporary, path)  # a reader sees the old file or the new one, never half of one
    return path


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    return repr(value)  # int, float


def _set_top_level(lines: list[str], name: str, line: str | None) -> list[str]:
    """`lines` with the top-level assignment of `name` replaced by `line` (or removed when None),
    or `line` added after the last top-level assignment (before the first [table])."""
    first_table = next(
        (i for i, text in enumerate(lines) if text.lstrip().startswith("[")), len(lines)
    )
    assignment = re.compile(rf'^\s*(?:{re.escape(name)}|"{re.escape(name)}")\s*=')
    for i in range(first_table):
        if assignment.match(lines[i]):
            return lines[:i] + ([line] if line is not None else []) + lines[i + 1 :]
    if line is None:
        return lines
    end = first_table
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    return lines[:end] + [line] + lines[end:]


def _set_in_table(lines: list[str], table: str, name: str, line: str | None) -> list[str]:
    """`lines` with `name` of `[table]` set to `line` (removed when None); the table is added at
    the end of the file when it is not there."""
    header = re.compile(rf"^\s*\[{re.escape(table)}\]\s*(#.*)?$")
    start = next((i for i, text in enumerate(lines) if header.match(text)), None)
    if start is None:
        if line is None:
            return lines
        gap = [""] if lines and lines[-1].strip() else []
        return [*lines, *gap, f"[{table}]", line]
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines)
    )
    assignment = re.compile(rf'^\s*(?:{re.escape(name)}|"{re.escape(name)}")\s*=')
    for i in range(start + 1, end):
        if assignment.match(lines[i]):
            return lines[:i] + ([line] if line is not None else []) + lines[i + 1 :]
    if line is None:
        return lines
    return lines[: start + 1] + [line] + lines[start + 1 :]
