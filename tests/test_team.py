"""Team mode's library: the team file and its roles, the one check of every write, and who a dashboard
request is (a local user, a trusted proxy's header, an OpenID Connect login)."""

from __future__ import annotations

import os
import time

import patience
import pytest

from cartomap.errors import CartomapError
from cartomap.team import access as ac
from cartomap.team.roles import (
    TEAM_ENV,
    USER_ENV,
    Action,
    Refused,
    Role,
    check,
    load_team,
    local_member,
    parse_team,
    refusal,
)

TEAM = """
[users]
"Alice@Example.org" = "owner"
"bob@example.org" = { role = "annotator", queues = ["aum-top3", "b1"] }
dana = { role = "annotator" }
"carol@example.org" = "viewer"
"""


@pytest.fixture()
def team():
    return parse_team(TEAM, "team.toml")


def test_roles_and_names_are_read_from_the_file(team):
    alice = team.member("  alice@EXAMPLE.org ")  # case and spaces do not matter
    assert (alice.name, alice.role, alice.known) == ("Alice@Example.org", Role.OWNER, True)
    bob = team.member("bob@example.org", "proxy")
    assert bob.role is Role.ANNOTATOR and bob.queues == {"aum-top3", "b1"} and bob.source == "proxy"
    assert team.member("dana").queues is None  # every queue
    mallory = team.member("mallory")
    assert (mallory.role, mallory.known) == (Role.VIEWER, False)  # the least role
    assert mallory.describe() == "mallory (viewer: not in the team file)"
    assert team.owners == ["Alice@Example.org"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[users\n", "team.toml: not valid TOML"),
        ('[users]\nx = "boss"', "user 'x': unknown role 'boss': expected one of owner, annotator, viewer"),
        ('[users]\nx = "annotator"', "no owner"),
        ('[users]\nx = "owner"\n" X " = "viewer"', "listed twice"),
        ('[users]\nx = { role = "owner", team = 1 }', "unknown field 'team'"),
        ('[users]\nx = { queues = ["a"] }', "user 'x': no role"),
        ('[users]\nx = "owner"\ny = { role = "annotator", queues = [1] }', "queues must be a list"),
        ('owner = "x"', "unknown table or key 'owner'"),
        ("", "no [users] table"),
    ],
)
def test_a_bad_team_file_is_one_line_naming_it(text, expected):
    with pytest.raises(CartomapError) as err:
        parse_team(text, "team.toml")
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("team.toml")


def test_the_line_of_a_toml_error_is_named():
    with pytest.raises(CartomapError, match=r"line 3"):
        parse_team('[users]\nx = "owner"\ny = = 1\n', "team.toml")


def test_who_may_do_what(team):
    alice, bob, dana = team.member("alice@example.org"), team.member("bob@example.org"), team.member("dana")
    carol, mallory = team.member("carol@example.org"), team.member("mallory")
    for action in Action:
        assert refusal(alice, action, "anything") is None  # an owner does everything
        assert refusal(None, action) is None  # one person without a team: everything
    assert refusal(bob, Action.DECIDE, "aum-top3") is None and refusal(bob, Action.DECIDE, "b1") is None
    why = refusal(bob, Action.DECIDE, "other")
    assert why.startswith("bob@example.org (annotator) is not assigned to the queue 'other'")
    assert refusal(dana, Action.DECIDE, "other") is None  # no queues listed: every queue
    for action in set(Action) - {Action.DECIDE, Action.TAG, Action.VIEW}:
        why = refusal(bob, action)
        assert f"may not {action.doing}: only an owner can" in why and "\n" not in why
    # an annotator flags examples for later and saves views, on any run; a viewer does not
    assert refusal(bob, Action.TAG) is None and refusal(bob, Action.VIEW) is None
    why = refusal(carol, Action.TAG)
    assert "may not tag examples: only an owner or an annotator can" in why
    assert "may only read" in refusal(carol, Action.DECIDE, "aum-top3")
    assert "not in the team file" in refusal(mallory, Action.TRAIN) and "(roles: team.toml)" in refusal(
        mallory, Action.TRAIN
    )
    with pytest.raises(Refused, match="start or resume training"):
        check(carol, Action.TRAIN)
    check(alice, Action.TRAIN)


def test_the_team_file_of_a_store_and_the_local_person(tmp_path, monkeypatch):
    monkeypatch.delenv(TEAM_ENV, raising=False)
    assert load_team(tmp_path) is None and local_member(tmp_path) is None  # no file: one person
    (tmp_path / "team.toml").write_text(TEAM, encoding="utf-8")
    monkeypatch.setenv(USER_ENV, "bob@example.org")
    member = local_member(tmp_path)
    assert (member.name, member.role, member.source) == ("bob@example.org", Role.ANNOTATOR, "local user")
    # a changed file is read again
    time.sleep(0.01)
    (tmp_path / "team.toml").write_text(
        TEAM.replace('"annotator", queues', '"owner", queues'), encoding="utf-8"
    )
    os.utime(tmp_path / "team.toml", ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    assert local_member(tmp_path).role is Role.OWNER
    # CARTOMAP_TEAM names another file; a missing one is an error, never "no team"
    other = tmp_path / "elsewhere.toml"
    monkeypatch.setenv(TEAM_ENV, str(other))
    with pytest.raises(CartomapError, match="no such team file"):
        load_team(tmp_path)
    other.write_text('[users]\n"bob@example.org" = "owner"\n', encoding="utf-8")
    assert load_team(tmp_path).path == other
    monkeypatch.delenv(USER_ENV)
    import getpass

    assert local_member(tmp_path).name == getpass.getuser()


# --------------------------------------------------------------------------- access: who a request is
def test_listening_beyond_this_machine_needs_a_login_or_open():
    local = ac.Access()
    for address in ("127.0.0.1", "127.0.0.2", "localhost", "::1"):
        assert ac.listen_refusal(address, local) is None
    why = ac.listen_refusal("0.0.0.0", local)
    assert "--trust-user-header" in why and "--login" in why and "--open" in why and "\n" not in why
    assert ac.listen_refusal("0.0.0.0", ac.Access(open=True)) is None
    assert ac.listen_refusal("10.0.0.5", ac.Access(mode="header", header="X-Forwarded-User")) is None
    assert ac.listen_refusal("0.0.0.0", ac.Access(mode="login")) is None


def test_settings_travel_to_the_server_in_env():
    access = ac.Access(mode="header", header="X-Forwarded-User", proxies=("10.0.0.5", "10.1.0.0/16"))
    env = access.to_env()
    assert env[ac.FORWARDED_ENV] == ""  # uvicorn never replaces the peer's address with X-Forwarded-For
    assert ac.Access.from_env(env) == access
    assert ac.Access.from_env({}) == ac.Access()
    assert ac.FORWARDED_ENV not in ac.Access().to_env()
    with pytest.raises(CartomapError, match="header name"):
        ac.Access(mode="header", header="X User")
    with pytest.raises(CartomapError, match="not an IP address"):
        ac.Access(mode="header", header="X-User", proxies=("proxy.example.org",))
    with pytest.raises(CartomapError, match="unknown access mode"):
        ac.Access(mode="sso")


def test_the_user_header_counts_only_from_the_trusted_proxy():
    access = ac.Access(mode="header", header="X-Forwarded-User")  # proxy 127.0.0.1 by default
    headers = {"x-forwarded-user": " alice@example.org ", "Host": "team.example.org"}
    # Streamlit reports a connection from this machine as no address
    assert ac.header_user(access, headers, None) == ("alice@example.org", None)
    name, why = ac.header_user(access, headers, "192.168.1.7")  # straight to the server: ignored
    assert name is None and "192.168.1.7" in why
    name, why = ac.header_user(access, {"Host": "x"}, None)
    assert name is None and "sent no user (header X-Forwarded-User)" in why
    remote = ac.Access(mode="header", header="X-Forwarded-User", proxies=("10.0.0.0/24",))
    assert ac.header_user(remote, headers, "10.0.0.9")[0] == "alice@example.org"
    assert ac.header_user(remote, headers, "::ffff:10.0.0.9")[0] == "alice@example.org"
    assert ac.header_user(remote, headers, None)[0] is None  # this machine is not that proxy
    assert ac.header_user(remote, headers, "10.0.1.9")[0] is None


def test_identify_puts_the_request_and_the_team_together(monkeypatch):
    team = parse_team(TEAM, "team.toml")
    monkeypatch.setenv(USER_ENV, "carol@example.org")
    assert ac.identify(ac.Access(), None).member is None and not ac.identify(ac.Access(), None).team
    local = ac.identify(ac.Access(), team)
    assert local.member.name == "carol@example.org" and local.member.source == "local user" and local.team
    header = ac.Access(mode="header", header="X-Forwarded-User")
    who = ac.identify(header, team, headers={"X-Forwarded-User": "bob@example.org"}, ip=None)
    assert who.member.role is Role.ANNOTATOR and who.member.source == "proxy"
    refused = ac.identify(header, team, headers={"X-Forwarded-User": "alice@example.org"}, ip="10.9.9.9")
    assert refused.member is None and refused.refusal and refused.team
    login = ac.Access(mode="login")
    out = ac.identify(login, team, logged_in=False)
    assert out.needs_login and out.refusal
    who = ac.identify(login, team, logged_in=True, claims={"email": "ALICE@example.org", "sub": "123"})
    assert who.member.role is Role.OWNER and who.member.source == "login"
    assert ac.identify(login, team, logged_in=True, claims={"sub": "zed"}).member.describe() == (
        "zed (viewer: not in the team file)"
    )
    assert "named nobody" in ac.identify(login, team, logged_in=True, claims={}).refusal
    assert "no team file" in ac.identify(login, None, logged_in=True, claims={"sub": "x"}).refusal


def test_a_login_needs_the_providers_secrets(tmp_path):
    secrets = tmp_path / "secrets.toml"
    assert "no such file" in ac.login_problem(secrets)
    secrets.write_text("[server]\nx = 1\n", encoding="utf-8")
    assert "no [auth] table" in ac.login_problem(secrets)
    secrets.write_text('[auth]\nredirect_uri = "http://localhost:8501/oauth2callback"\n', encoding="utf-8")
    assert "no cookie_secret" in ac.login_problem(secrets)
    secrets.write_text(
        '[auth]\nredirect_uri = "http://localhost:8501/oauth2callback"\ncookie_secret = "s"\n'
        'client_id = "c"\nclient_secret = "d"\nserver_metadata_url = "http://localhost:1/x"\n',
        encoding="utf-8",
    )
    assert ac.login_problem(secrets) is None


def test_a_user_header_sent_twice_or_as_a_list_signs_nobody_in():
    """A proxy that appends its header to the browser's: two values are refused, never the first taken."""
    access = ac.Access(mode="header", header="X-Forwarded-User")
    twice = [("X-Forwarded-User", "alice@example.org"), ("x-forwarded-user", "mallory@example.org")]
    for headers in (twice, {"X-Forwarded-User": ["alice@example.org", "mallory@example.org"]}):
        name, why = ac.header_user(access, headers, None)
        assert name is None and "names 2 users" in why and "\n" not in why
    name, why = ac.header_user(access, {"X-Forwarded-User": "alice@example.org, mallory@example.org"}, None)
    assert name is None and "names 2 users" in why

    class Headers(dict):  # Streamlit's headers: the first value by key, every value by get_all
        def get_all(self, key):
            return [v for k, v in twice if k.lower() == key.lower()]

    assert ac.header_user(access, Headers({"x-forwarded-user": "alice@example.org"}), None)[0] is None
    team = parse_team(TEAM, "team.toml")
    who = ac.identify(access, team, headers=twice, ip=None)
    assert who.member is None and "names 2 users" in who.refusal


def test_a_shared_secret_lets_only_the_proxy_sign_people_in():
    secret = "0123456789abcdef0123"
    access = ac.Access(mode="header", header="X-Forwarded-User", secret=secret)
    user = ("X-Forwarded-User", "alice@example.org")
    assert ac.header_user(access, [user, (ac.SECRET_HEADER, secret)], None) == ("alice@example.org", None)
    for secrets in ([], [(ac.SECRET_HEADER, "wrong" * 4)], [(ac.SECRET_HEADER, secret)] * 2):
        name, why = ac.header_user(access, [user, *secrets], None)
        assert name is None and ac.SECRET_HEADER in why
    # it travels to the server in env, never in the repr
    assert ac.Access.from_env(access.to_env()).secret == secret and secret not in repr(access)
    assert ac.proxy_warning(access) is None
    base64 = "q83vEjRWeJq8/+3v=="  # openssl rand -base64: slashes, pluses and equals signs are fine
    assert ac.header_user(ac.Access(mode="header", header="X-Forwarded-User", secret=base64),
                          [user, (ac.SECRET_HEADER, base64)], None)[0] == "alice@example.org"  # fmt: skip
    for bad in ("short", "0123456789abcdef,0123", "0123456789abcdef 0123"):
        with pytest.raises(CartomapError, match="at least 16 printable ASCII characters"):
            ac.Access(mode="header", header="X-Forwarded-User", secret=bad)
    with pytest.raises(CartomapError, match="goes with --trust-user-header"):
        ac.Access(mode="login", secret=secret)


def test_a_proxy_anywhere_is_refused_and_a_local_one_without_a_secret_warned_of():
    for wide in ("0.0.0.0/0", "::/0", "8.8.8.0/24", "0.0.0.0/1"):
        access = ac.Access(mode="header", header="X-User", proxies=("10.0.0.5", wide))
        why = ac.proxy_refusal(access)
        assert why is not None and wide in why and "--open" in why
        assert ac.proxy_refusal(ac.Access(mode="header", header="X-User", proxies=(wide,), open=True)) is None
    for narrow in ("127.0.0.1", "10.0.0.5", "192.168.1.0/24", "fd00::/8"):
        assert ac.proxy_refusal(ac.Access(mode="header", header="X-User", proxies=(narrow,))) is None
    warning = ac.proxy_warning(ac.Access(mode="header", header="X-User"))
    assert "every user of this machine can sign in as anyone" in warning and "--proxy-secret-file" in warning
    assert ac.proxy_warning(ac.Access(mode="header", header="X-User", proxies=("10.0.0.5",))) is None
    assert ac.proxy_warning(ac.Access()) is None


def test_an_unreachable_sign_in_provider_is_one_line():
    closed = "http://127.0.0.1:9/.well-known/openid-configuration"  # the discard port: nothing listens
    why = ac.provider_problem({"server_metadata_url": closed}, timeout=patience.WAIT_S)  # refused at once
    assert why is not None and why.startswith("the sign-in provider cannot be reached") and "\n" not in why
    nested = {"redirect_uri": "x", "google": {"server_metadata_url": "https://accounts.example/.wk"}}
    assert ac.metadata_url(nested) == "https://accounts.example/.wk"
    fine = {"authorization_endpoint": "https://login.example/auth"}
    assert ac.provider_problem(nested, fetch=lambda url, timeout: fine) is None
    assert "no authorization_endpoint" in ac.provider_problem(nested, fetch=lambda url, timeout: {})
    assert ac.provider_problem({}) is None  # nothing to ask: Streamlit's own check speaks
