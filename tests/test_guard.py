"""The guard's checks, one by one, with the cases a browser attack would try."""

from __future__ import annotations

import pytest

from bundle_contract._generated.errors import (
    HostNotAllowed,
    OriginNotAllowed,
    SessionRequired,
    UnsupportedMediaType,
)
from bundle_server._http.guard import (
    check_host,
    check_json_media_type,
    check_origin,
    check_session,
)

PORT = 4321
TOKEN = "Zm9vYmFyLXRva2VuLXdpdGgtMzItYnl0ZXMtb2YtZW50cm9weQ"


@pytest.mark.parametrize(
    "host", ["127.0.0.1:4321", "localhost:4321", "[::1]:4321", "LOCALHOST:4321"]
)
def test_loopback_hosts_pass(host: str) -> None:
    assert check_host(host, PORT) == host.lower()


@pytest.mark.parametrize(
    "host",
    [None, "", "127.0.0.1", "127.0.0.1:80", "localhost:43210", "localhost.evil.com:4321",
     "evil.com:4321", "127.0.0.2:4321", "0.0.0.0:4321", "[::1]", "localhost:4321 ",
     "attacker.localhost:4321"],
)  # fmt: skip
def test_foreign_hosts_fail(host: str | None) -> None:
    with pytest.raises(HostNotAllowed) as caught:
        check_host(host, PORT)
    assert caught.value.http_status == 403


def test_dns_rebinding_pair() -> None:
    # The attacker's name resolves to 127.0.0.1, so the socket is ours, but Host is theirs.
    with pytest.raises(HostNotAllowed):
        check_host("rebind.attacker.example:4321", PORT)
    assert check_host("127.0.0.1:4321", PORT)


def test_origin_rules() -> None:
    check_origin(None, "127.0.0.1:4321")
    check_origin("http://127.0.0.1:4321", "127.0.0.1:4321")
    check_origin("http://localhost:5173", "127.0.0.1:4321", ["http://localhost:5173"])
    for origin in ("null", "http://127.0.0.1:4322", "https://127.0.0.1:4321", "http://evil.com",
                   "http://localhost:4321", "http://127.0.0.1:4321/", ""):  # fmt: skip
        with pytest.raises(OriginNotAllowed):
            check_origin(origin, "127.0.0.1:4321")


def test_session_rules() -> None:
    check_session(TOKEN, TOKEN)
    same_length_wrong = TOKEN[:-1] + ("A" if TOKEN[-1] != "A" else "B")
    for presented in (None, "", "wrong", same_length_wrong, TOKEN + "x", "é" * len(TOKEN),
                      "\u0000" * 10, TOKEN * 20):  # fmt: skip
        with pytest.raises(SessionRequired) as caught:
            check_session(presented, TOKEN)
        assert caught.value.http_status == 401


@pytest.mark.parametrize(
    "value",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        'application/json; charset="UTF-8"',
        "application/json;charset=utf8",
        ["application/json"],
    ],
)
def test_json_media_type_passes(value: str | list[str]) -> None:
    check_json_media_type(value)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "text/plain",
        "application/jsonx",
        "text/plain; application/json",
        "application/json-seq",
        "application/json; charset=utf-16",
        "application/json; charset=latin-1",
        ["application/json", "text/plain"],
        ["application/json", "application/json"],
    ],
)
def test_other_media_types_fail(value: str | list[str] | None) -> None:
    with pytest.raises(UnsupportedMediaType) as caught:
        check_json_media_type(value)
    assert caught.value.http_status == 415
