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
  stops the server from replacing it with X-Forwarded-For: :data:`FORWARDED_ENV`). A header that
  arrives twice (or holds two comma-separated values: a proxy that appended its own to the browser's)
  names nobody: the request is not signed in. With a **shared secret** (``--proxy-secret-file``, or env
  :data:`SECRET_ENV`) the proxy must also send it in :data:`SECRET_HEADER`, compared in constant time:
  then only the proxy, not every program that can connect from its address, signs people in. A trusted
  loopback proxy without a secret lets every user of this machine sign in as anyone
  (:func:`proxy_warning`); a trusted network that covers every address or public ones is refused
  (:func:`proxy_refusal`) unless the user says ``--open``.
* ``login`` (``--login``): Streamlit's own OpenID Connect login (``st.login``), the provider configured
  in ``.streamlit/secrets.toml``; the person is the ID token's e-mail (else preferred_username, else
  sub: :func:`claims_user`).

:func:`identify` puts a request's facts (headers, address, login claims) and the team file together
into the :class:`Visitor` the pages act as. Pure: the pages read the facts from Streamlit.
"""

from __future__ import annotations

import hmac
import importlib.util
import ipaddress
import json
import os
import re
import urllib.request
from collections.abc import Callable, Iterable, Mapping
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
#: The header in which the proxy sends the secret it shares with the dashboard.
SECRET_HEADER = "X-Cartomap-Proxy-Secret"
#: Env holding that secret (the launcher puts the one of ``--proxy-secret-file`` there for the server).
SECRET_ENV = "CARTOMAP_PROXY_SECRET"
#: A shared secret has at least this many characters (``openssl rand -hex 32`` gives 64).
MIN_SECRET = 16
#: A header name (an HTTP token).
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
#: A shared secret: printable ASCII without spaces or commas (a header's values are split at commas).
_SECRET = re.compile(r"^[\x21-\x2b\x2d-\x7e]+$")


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
    #: the user said plainly that whoever reaches the server may act as anyone: a server beyond this
    #: machine without a login (local mode), a trusted proxy anywhere (header mode).
    open: bool = False
    #: header mode: the secret the proxy sends in :data:`SECRET_HEADER` ("" when none is asked for).
    secret: str = field(default="", repr=False)

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
        if self.secret and self.mode != "header":
            raise CartomapError("a proxy secret goes with --trust-user-header: only a proxy sends it")
        if self.secret and (len(self.secret) < MIN_SECRET or not _SECRET.match(self.secret)):
            raise CartomapError(
                f"the proxy secret needs at least {MIN_SECRET} printable ASCII characters without spaces or "
                "commas (e.g. the output of `openssl rand -hex 32`)"
            )

    def to_env(self) -> dict[str, str]:
        """The server's environment that carries these settings (:meth:`from_env` reads it back)."""
        env = {AUTH_ENV: self.mode, OPEN_ENV: "1" if self.open else "0", PROXY_ENV: ",".join(self.proxies)}
        env[HEADER_ENV] = self.header
        env[SECRET_ENV] = self.secret
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
            secret=env.get(SECRET_ENV, "").strip(),
        )

    def describe(self) -> str:
        if self.mode == "header":
            shared = f", secret in {SECRET_HEADER}" if self.secret else ""
            return f"signed in by the proxy at {', '.join(self.proxies)} (header {self.header}{shared})"
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


def _public(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    """Whether ``network`` covers every address, or addresses that are neither private, loopback nor
    link-local (the internet's)."""
    return network.prefixlen == 0 or not (network.is_private or network.is_loopback or network.is_link_local)


def proxy_refusal(access: Access) -> str | None:
    """Why the dashboard must not start trusting these proxies (one line), None when it may: a trusted
    proxy that covers every address (``0.0.0.0/0``, ``::/0``) or public ones lets anyone who reaches the
    server sign in as anyone by sending the header, unless the user says so plainly (``--open``)."""
    if access.mode != "header" or access.open:
        return None
    wide = [p for p in access.proxies if _public(_network(p))]
    if not wide:
        return None
    return (
        f"--trusted-proxy {wide[0]} covers public addresses: whoever reaches the dashboard from there could "
        f"send {access.header} and sign in as anyone. Name the proxy's own address (e.g. 127.0.0.1, "
        "10.0.0.5), or say --open to accept that anyone may sign in as anyone"
    )


def proxy_warning(access: Access) -> str | None:
    """What the user should know about trusting these proxies (one line), None when nothing: a proxy on
    this machine without a shared secret makes every local connection's header count, so every user of
    this machine can sign in as anyone by connecting to the dashboard directly."""
    if access.mode != "header" or access.secret:
        return None
    local = [p for p in access.proxies if _network(p).network_address.is_loopback]
    if not local:
        return None
    return (
        f"the dashboard trusts header {access.header} from every connection of {local[0]}: every user of "
        "this machine can sign in as anyone by connecting to it directly. On a machine with other users, "
        f"give the proxy and the dashboard a shared secret (--proxy-secret-file FILE; the proxy sends it in "
        f"{SECRET_HEADER})"
    )


def header_values(headers: Mapping[str, Any] | Iterable[tuple[str, Any]], name: str) -> list[str]:
    """Every value of header ``name`` (case ignored) in ``headers``: Streamlit's headers (``get_all``), a
    mapping (a value may be a list of values) or (name, value) pairs; a value is split at commas (HTTP
    joins repeated header lines with commas)."""
    wanted = name.lower()
    if hasattr(headers, "get_all"):
        pairs = [(name, v) for v in headers.get_all(name)]
    else:
        pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    raw = []
    for key, value in pairs:
        if str(key).lower() == wanted:
            raw += list(value) if isinstance(value, (list, tuple)) else [value]
    return [part for value in raw for part in str(value if value is not None else "").split(",")]


def _secret_problem(access: Access, headers: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> str | None:
    """Why the proxy's secret does not match (one line), None when it does or none is asked for: exactly
    one value of :data:`SECRET_HEADER`, equal to the secret (``hmac.compare_digest``)."""
    if not access.secret:
        return None
    values = [v.strip() for v in header_values(headers, SECRET_HEADER)]
    if len(values) == 1 and hmac.compare_digest(values[0].encode(), access.secret.encode()):
        return None
    return (
        f"this connection did not come through the sign-in proxy (its secret in {SECRET_HEADER} is "
        "missing or wrong): open the dashboard through the proxy"
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


def header_user(
    access: Access, headers: Mapping[str, Any] | Iterable[tuple[str, Any]], ip: str | None
) -> tuple[str | None, str | None]:
    """(the user the proxy's header names, None) or (None, why not) for a request with ``headers`` from
    ``ip``: the header counts only from a trusted proxy, with the shared secret when one is set, and only
    when it holds one value (see the module docstring)."""
    if not from_trusted_proxy(ip, access.proxies):
        return None, (
            f"this dashboard is opened through its sign-in proxy only ({', '.join(access.proxies)}); "
            f"this connection came from {ip or 'this machine'}"
        )
    why = _secret_problem(access, headers)
    if why is not None:
        return None, why
    names = [" ".join(v.split()) for v in header_values(headers, access.header)]
    names = [n for n in names if n]
    if len(names) > 1:
        return None, (
            f"the request names {len(names)} users (header {access.header} twice, or a list): not signed "
            "in. The proxy must replace that header, not add to what the browser sent"
        )
    if not names:
        return None, f"the sign-in proxy sent no user (header {access.header}): sign in through the proxy"
    return names[0], None


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


#: Seconds the sign-in provider's metadata may take to answer before signing in is called off.
PROVIDER_TIMEOUT_S = 5.0


def metadata_url(auth: Mapping[str, Any]) -> str | None:
    """The OpenID Connect metadata address of the provider ``st.login()`` uses: the ``[auth]`` table's
    ``server_metadata_url``, else that of its only provider sub-table (``[auth.NAME]``); None when
    there is none (Streamlit's own check then speaks)."""
    url = auth.get("server_metadata_url")
    if url:
        return str(url)
    subs = [v for v in auth.values() if isinstance(v, Mapping) and v.get("server_metadata_url")]
    return str(subs[0]["server_metadata_url"]) if len(subs) == 1 else None


def _fetch_json(url: str, timeout: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - the owner's provider
        return json.loads(response.read(1_000_000).decode("utf-8"))


def provider_problem(
    auth: Mapping[str, Any],
    fetch: Callable[[str, float], Any] | None = None,
    timeout: float = PROVIDER_TIMEOUT_S,
) -> str | None:
    """Why signing in cannot start now (one line), None when it can: the provider's metadata
    (:func:`metadata_url`) must answer within ``timeout`` seconds as JSON with an
    ``authorization_endpoint`` (Streamlit would otherwise answer "Authentication error" and log a
    traceback). ``fetch(url, timeout)`` reads the JSON (default: urllib)."""
    url = metadata_url(auth)
    if url is None:
        return None
    try:
        metadata = (fetch or _fetch_json)(url, timeout)
    except Exception as err:  # noqa: BLE001 - any failure to reach the provider is said in one line
        reason = getattr(err, "reason", None) or err
        return (
            f"the sign-in provider cannot be reached ({url}: {type(err).__name__}: {reason}); try again later"
        )
    if not isinstance(metadata, Mapping) or not metadata.get("authorization_endpoint"):
        return f"the sign-in provider's metadata at {url} has no authorization_endpoint: check server_metadata_url"
    return None
