"""Who a dashboard request is, and when the dashboard refuses to listen beyond this machine.

Three ways in (:class:`Access`, set by ``cartomap dashboard`` and handed to the server in env):

* ``local`` (the default): no login. The person is the one at this machine (env ``CARTOMAP_USER``,
  else the operating system's user) when a team file exists, else nobody in particular (one person:
  everything allowed, annotators type their names). Listening beyond 127.0.0.1 this way is refused
  (:func:`listen_refusal`) unless the user says ``--open``.
* ``header`` (``--trust-user-header NAME``): an authenticating reverse proxy (oauth2-proxy, Authelia,
  Caddy's forward_auth, ...) signs people in and passes the user's name in header NAME. The header is
  honoured only on connections whose address is one of the trusted proxies (``--trusted-proxy``,
  127.0.0.1 by default): anyone else could send it too. The address is the TCP peer's (the launcher
  stops the server from replacing it with X-Forwarded-For: :data:`FORWARDED_ENV`).
* ``login`` (``--login``): Streamlit's own OpenID Connect login (``st.login``), the provider configured
  in ``.streamlit/secrets.toml``; the person is the ID token's e-mail (else preferred_username, else
  sub: :func:`claims_user`).

:func:`identify` puts a request's facts (headers, address, login claims) and the team file together
into the :class:`Visitor` the pages act as. Pure: the pages read the facts from Streamlit.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cartomap.errors import CartomapError
from cartomap.team.roles import Member, Team, local_user, tomllib

#: How people get in: no login, a trusted proxy's header, Streamlit's OpenID Connect login.
MODES = ("local", "header", "login")
AUTH_ENV = "CARTOMAP_AUTH"
HEADER_ENV = "CARTOMAP_USER_HEADER"
PROXY_ENV = "CARTOMAP_TRUSTED_PROXY"
OPEN_ENV = "CARTOMAP_OPEN"
#: uvicorn (under Streamlit) replaces a connection's address with X-Forwarded-For when it comes from
#: these addresses; the launcher empties it in header mode, so the address checked is the TCP peer's.
FORWARDED_ENV = "FORWARDED_ALLOW_IPS"
#: The proxy trusted by default: one on this machine.
DEFAULT_PROXY = "127.0.0.1"
#: A header name (an HTTP token).
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def is_loopback(address: str | None) -> bool:
    """Whether ``address`` is this machine only (127.0.0.0/8, ::1, localhost)."""
    text = str(address or "").strip().strip("[]")
    if text.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    if text.strip().lower() == "localhost":
        text = "127.0.0.1"
    try:
        return ipaddress.ip_network(text.strip().strip("[]"), strict=False)
    except ValueError:
        raise CartomapError(
            f"trusted proxy {text!r} is not an IP address or network (e.g. 127.0.0.1, 10.0.0.5, 10.0.0.0/24)"
        ) from None


@dataclass(frozen=True)
class Access:
    """How people get into the dashboard (see the module docstring)."""

    #: "local", "header" or "login".
    mode: str = "local"
    #: header mode: the request header holding the signed-in user (e.g. X-Forwarded-User).
    header: str = ""
    #: header mode: the addresses (or networks) the header is honoured from.
    proxies: tuple[str, ...] = field(default=(DEFAULT_PROXY,))
    #: local mode: the user said plainly that a server beyond this machine is open to whoever reaches it.
    open: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise CartomapError(f"unknown access mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.mode == "header" and not _TOKEN.match(self.header or ""):
            raise CartomapError(
                f"--trust-user-header needs a header name such as X-Forwarded-User, got {self.header!r}"
            )
        if not self.proxies:
            raise CartomapError("--trusted-proxy needs at least one address")
        for proxy in self.proxies:
            _network(proxy)

    def to_env(self) -> dict[str, str]:
        """The server's environment that carries these settings (:meth:`from_env` reads it back)."""
        env = {AUTH_ENV: self.mode, OPEN_ENV: "1" if self.open else "0", PROXY_ENV: ",".join(self.proxies)}
        env[HEADER_ENV] = self.header
        if self.mode == "header":
            env[FORWARDED_ENV] = ""  # the TCP peer's address, never one a header claims
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Access:
        env = os.environ if env is None else env
        proxies = tuple(p.strip() for p in env.get(PROXY_ENV, DEFAULT_PROXY).split(",") if p.strip())
        return cls(
            mode=env.get(AUTH_ENV, "local") or "local",
            header=env.get(HEADER_ENV, ""),
            proxies=proxies or (DEFAULT_PROXY,),
            open=env.get(OPEN_ENV, "0") == "1",
        )

    def describe(self) -> str:
        if self.mode == "header":
            return f"signed in by the proxy at {', '.join(self.proxies)} (header {self.header})"
        if self.mode == "login":
            return "signed in with OpenID Connect"
        return "open to whoever reaches it" if self.open else "this machine only"


def listen_refusal(address: str, access: Access) -> str | None:
    """Why the dashboard must not listen on ``address`` this way (one line), None when it may: beyond
    this machine only with a login (proxy header or OpenID Connect) or ``--open``."""
    if is_loopback(address) or access.mode != "local" or access.open:
        return None
    return (
        f"the dashboard would listen on {address} without a login: whoever reaches it could train, cancel "
        "and decide as anyone. Put an authenticating proxy in front (--trust-user-header NAME), sign people "
        "in with --login (OpenID Connect in .streamlit/secrets.toml), or say --open to serve it open"
    )


def from_trusted_proxy(ip: str | None, proxies: tuple[str, ...]) -> bool:
    """Whether a connection from ``ip`` comes from one of ``proxies``. Streamlit reports a connection
    from this machine as no address (None): it matches a loopback proxy."""
    networks = [_network(p) for p in proxies]
    if ip is None or str(ip).strip() == "":
        return any(n.network_address.is_loopback for n in networks)
    try:
        address = ipaddress.ip_address(str(ip).strip().strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in n for n in networks if n.version == address.version)


def header_user(access: Access, headers: Mapping[str, Any], ip: str | None) -> tuple[str | None, str | None]:
    """(the user the proxy's header names, None) or (None, why not) for a request with ``headers`` from
    ``ip``: the header counts only from a trusted proxy (see the module docstring)."""
    if not from_trusted_proxy(ip, access.proxies):
        return None, (
            f"this dashboard is opened through its sign-in proxy only ({', '.join(access.proxies)}); "
            f"this connection came from {ip or 'this machine'}"
        )
    wanted = access.header.lower()
    value = next((v for k, v in headers.items() if str(k).lower() == wanted), None)
    name = " ".join(str(value or "").split())
    if not name:
        return None, f"the sign-in proxy sent no user (header {access.header}): sign in through the proxy"
    return name, None


#: The ID-token claims that name a person, in the order asked.
NAME_CLAIMS = ("email", "preferred_username", "sub")


def claims_user(claims: Mapping[str, Any]) -> str | None:
    """The person an OpenID Connect login names: the first of :data:`NAME_CLAIMS` that is set."""
    for key in NAME_CLAIMS:
        value = " ".join(str(claims.get(key) or "").split())
        if value:
            return value
    return None


@dataclass(frozen=True)
class Visitor:
    """The person a dashboard session acts as."""

    #: None: one person without a team (everything allowed, annotators type their names).
    member: Member | None = None
    #: Set when the session may not use the dashboard at all (not signed in, not through the proxy).
    refusal: str | None = None
    #: Whether signing in (``st.login``) would help.
    needs_login: bool = False

    @property
    def team(self) -> bool:
        """Whether roles apply (a team file exists or people sign in)."""
        return self.member is not None or self.refusal is not None


def identify(
    access: Access,
    team: Team | None,
    *,
    headers: Mapping[str, Any] | None = None,
    ip: str | None = None,
    logged_in: bool = False,
    claims: Mapping[str, Any] | None = None,
) -> Visitor:
    """Who a request is (see the module docstring). In header and login mode a team file is needed (the
    launcher checks it before the server starts); a person it does not list is a viewer."""
    if access.mode == "local":
        return Visitor(None if team is None else team.member(local_user(), "local user"))
    if access.mode == "header":
        name, why = header_user(access, headers or {}, ip)
        source = "proxy"
    else:
        if not logged_in:
            return Visitor(None, "sign in to use this dashboard", needs_login=True)
        name = claims_user(claims or {})
        why = None if name else "the login named nobody (no email, preferred_username or sub claim)"
        source = "login"
    if why is not None:
        return Visitor(None, why)
    if team is None:
        return Visitor(
            None, "this dashboard has no team file: an owner must write one (team.toml in the run store)"
        )
    return Visitor(team.member(name, source))


#: Where Streamlit reads secrets when it is not told (the folder the server starts in, then the home's).
SECRETS_FILES = (Path(".streamlit") / "secrets.toml", Path("~") / ".streamlit" / "secrets.toml")


def login_problem(secrets: str | Path | None = None) -> str | None:
    """Why ``--login`` cannot work (one line), None when it can: Authlib installed, and an ``[auth]``
    table with ``redirect_uri`` and ``cookie_secret`` in the secrets file (``secrets``, else the first of
    :data:`SECRETS_FILES` that exists), as Streamlit's ``st.login`` needs them."""
    if importlib.util.find_spec("authlib") is None:
        return "--login needs Authlib (pip install Authlib): Streamlit's login uses it"
    paths = [Path(secrets)] if secrets else [p.expanduser() for p in SECRETS_FILES]
    found = next((p for p in paths if p.is_file()), None)
    if found is None:
        where = " or ".join(str(p) for p in paths)
        return f"--login needs an [auth] table (your OpenID Connect provider) in {where}: no such file"
    try:
        data = tomllib.loads(found.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        return f"{found}: cannot be read as TOML ({err})"
    auth = data.get("auth")
    if not isinstance(auth, dict):
        return f"{found}: no [auth] table: --login needs your OpenID Connect provider there"
    missing = [k for k in ("redirect_uri", "cookie_secret") if not auth.get(k)]
    if missing:
        return f"{found}: [auth] has no {missing[0]} (Streamlit's login needs redirect_uri and cookie_secret)"
    return None
