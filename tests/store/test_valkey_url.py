"""The Valkey store named by a URL (`runonce.store.valkey.connect`): the address, AUTH, the
replicas a claim waits for, the client's own options, and every mistake named with its fix."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runonce.core.errors import ConfigError, StoreUnavailable
from runonce.core.store import Claim, StoredResult
from tests.store.valkey_server import ValkeyServer

LEASE = timedelta(seconds=120)
RETENTION = timedelta(days=7)
FIELDS = {"job": "nightly-report", "schedule_time": "2026-11-29T03:00:00Z", "forced": False}


def _connect(url: str):
    from runonce.store.valkey import connect

    return connect(url, "url", LEASE, RETENTION)


def test_a_store_url_names_the_server_and_the_store_serves_on_it(valkey_server):
    store = _connect(f"valkey://127.0.0.1:{valkey_server.port}")
    claim = store.claim("run-by-url", dict(FIELDS))
    assert isinstance(claim, Claim) and store.complete(claim, StoredResult.of("ok")) is not None
    assert store._replicas == 0
    assert store._client.connection_pool.connection_kwargs["socket_timeout"] == 5.0


def test_the_urls_replicas_are_waited_for_and_its_client_options_reach_the_client(valkey_server):
    store = _connect(
        f"valkey://127.0.0.1:{valkey_server.port}/0?replicas=1&replica_wait_ms=50&socket_timeout=2"
    )
    assert (store._replicas, store._replica_wait_ms) == (1, 50)
    assert store._client.connection_pool.connection_kwargs["socket_timeout"] == 2.0
    with pytest.raises(StoreUnavailable, match="acknowledged by 0 of the 1 replicas"):
        store.claim("run-by-url-with-replicas", dict(FIELDS))


def test_a_url_with_a_user_and_password_authenticates_as_that_user(valkey_server):
    import valkey

    server = ValkeyServer()
    try:
        admin = valkey.Valkey(port=server.port, decode_responses=True)
        admin.execute_command("ACL", "SETUSER", "runner", "on", ">s3cret", "~*", "&*", "+@all")
        admin.execute_command("ACL", "SETUSER", "default", "off")
        admin.close()
        store = _connect(f"valkey://runner:s3cret@127.0.0.1:{server.port}")
        assert store._client.acl_whoami() == "runner"
        assert isinstance(store.claim("run-as-runner", dict(FIELDS)), Claim)
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis://127.0.0.1:6379", "is not valkey://HOST:PORT or valkeys://HOST:PORT (TLS)"),
        ("127.0.0.1:6379", "is not valkey://HOST:PORT or valkeys://HOST:PORT (TLS)"),
        ("valkey://:6379", "cannot be used: it names no host"),
        ("valkey://127.0.0.1:6379?replicas=two", "has replicas='two': give a whole number, 0 or more"),
        ("valkey://127.0.0.1:6379?replicas=-1", "has replicas='-1': give a whole number, 0 or more"),
        (
            "valkey://127.0.0.1:6379?replica_wait_ms=0",
            "has replica_wait_ms='0': give a whole number, 1 or more",
        ),
    ],
)
def test_a_wrong_url_is_a_config_error_naming_the_part_and_the_fix(url, said):
    with pytest.raises(ConfigError) as wrong:
        _connect(url)
    assert said in str(wrong.value)


def test_a_wrong_urls_error_hides_its_password():
    with pytest.raises(ConfigError) as wrong:
        _connect("valkey://runner:s3cret@127.0.0.1:6379?replicas=x")
    assert "s3cret" not in str(wrong.value) and "runner:***@127.0.0.1:6379" in str(wrong.value)


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate for 127.0.0.1 it signed: (CA file, certificate, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    now = datetime.now(UTC)
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder(issuer_name=name("runonce test CA"), subject_name=name("runonce test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder(issuer_name=ca.subject, subject_name=name("127.0.0.1"))
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = (folder / "ca.pem", folder / "server.pem", folder / "server.key")
    files[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    files[2].write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return files


def test_a_valkeys_url_speaks_tls_verified_by_the_ca_it_names_and_refuses_a_server_it_cannot_verify(
    valkey_server, tmp_path
):
    from emulator.process import free_port

    ca, certificate, key = _certificates(tmp_path)
    tls_port = free_port()
    settings = ["--tls-port", str(tls_port), "--tls-cert-file", str(certificate), "--tls-key-file", str(key)]
    server = ValkeyServer(*settings, "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no")
    try:
        store = _connect(f"valkeys://127.0.0.1:{tls_port}?ssl_ca_certs={ca}")
        claim = store.claim("run-over-tls", dict(FIELDS))
        assert isinstance(claim, Claim) and store.complete(claim, StoredResult.of("ok")) is not None
        unverified = _connect(f"valkeys://127.0.0.1:{tls_port}")  # the system's CAs: not this server's
        with pytest.raises(StoreUnavailable, match="certificate verify failed"):
            unverified.claim("run-over-tls", dict(FIELDS))
        plain = _connect(f"valkey://127.0.0.1:{tls_port}")  # no TLS to a TLS port
        with pytest.raises(StoreUnavailable):
            plain.claim("run-over-tls", dict(FIELDS))
    finally:
        server.stop()


def test_runonce_store_ca_gives_the_servers_ca_as_pem_text_as_the_stack_sets_it(
    valkey_server, tmp_path, monkeypatch
):
    """A deployed function has no file for the instance's CA: the stack sets RUNONCE_STORE_CA to
    the certificates as PEM text (docs/stacks/stores.md), and open_store verifies the server with
    them; given for a URL without TLS it is a config error naming the fix."""
    from emulator.process import free_port
    from runonce.contract import STORE_CA_VARIABLE
    from runonce.store.connection import open_store

    ca, certificate, key = _certificates(tmp_path)
    tls_port = free_port()
    settings = ["--tls-port", str(tls_port), "--tls-cert-file", str(certificate), "--tls-key-file", str(key)]
    server = ValkeyServer(*settings, "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no")
    lease, retention = timedelta(seconds=60), timedelta(hours=1)
    try:
        monkeypatch.setenv(STORE_CA_VARIABLE, ca.read_text())
        store = open_store(f"valkeys://127.0.0.1:{tls_port}", "runs", lease, retention)
        claim = store.claim("run-over-tls-pem", dict(FIELDS))
        assert isinstance(claim, Claim) and store.complete(claim, StoredResult.of("ok")) is not None
        with pytest.raises(ConfigError, match="valkeys://"):
            open_store(f"valkey://127.0.0.1:{tls_port}", "runs", lease, retention)
        monkeypatch.delenv(STORE_CA_VARIABLE)
        unverified = open_store(f"valkeys://127.0.0.1:{tls_port}", "runs", lease, retention)
        with pytest.raises(StoreUnavailable, match="certificate verify failed"):
            unverified.claim("run-over-tls-pem", dict(FIELDS))
    finally:
        server.stop()
