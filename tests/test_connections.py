"""The ways to reach Redis besides ``redis://host:port``, each carrying a job from enqueue to a real worker.

Every server here is one that the suite's plain-TCP server can't stand in for:
a django-redis cache alias on database 3 (with ``REDIS_URL`` pointing at a
port nobody listens on), a redis-server listening only on a unix socket, and
one listening only for TLS. The job reports to the suite's server, so the test
sees it ran; the target server shows where it was queued and who took it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import redis as redis_py
from django.conf import settings
from django.test import override_settings

from djwork.testing.redis_server import RedisServer, TlsFiles, free_port
from tests import worker_jobs
from tests.helpers_worker import counts, decode, history_runs, in_progress_items, wait_until
from tests.settings_worker_cache import CACHE_DATABASE, cache_location

IN_CI = os.environ.get("CI") == "true"
# What redis-server says at start when it was built without TLS (an unknown
# directive, or TLS named as unsupported); any other start failure is a test failure.
TLS_UNSUPPORTED_MARKERS = ("Bad directive", "not supported", "Missing implement", "built without")


def _unavailable(reason: str) -> None:
    """A missing prerequisite: a failure in CI, where it must be there; a skip on a developer's machine."""
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def _carry_one_job(workers, raw_redis, target: redis_py.Redis, key: str, overrides: dict[str, Any],
                   *worker_args: str) -> None:
    """Enqueue (under the caller's settings) must already have put job ``key`` on ``target``; run a worker
    configured by ``overrides`` and check that it took the job from ``target``, and nothing from the suite's."""
    queued = [decode(raw) for raw in target.lrange("queue:default", 0, -1)]
    assert len(queued) == 1 and f'"args":["{key}"]' in queued[0], queued
    assert raw_redis.llen("queue:default") == 0
    worker = workers.start("-c", "2", *worker_args, overrides=overrides)

    wait_until(lambda: counts(raw_redis).get(key) == 1, 30, f"the job {key!r} to run")
    (identity,) = wait_until(lambda: target.smembers("processes"), 10, "the worker to register on the target")
    info = target.hget(identity, "info")
    assert info is not None and f'"pid":{worker.pid}' in decode(info)
    assert raw_redis.scard("processes") == 0
    wait_until(lambda: target.llen("queue:default") == 0 and not any(in_progress_items(target).values()), 10,
               "the job to leave the target's queue and in-progress list")
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0
    assert counts(raw_redis) == {key: 1}


# --- CACHE: a django-redis alias --------------------------------------------------------------------
def test_cache_alias_is_the_connection_used(workers, raw_redis, redis_url):
    target = redis_py.Redis.from_url(cache_location(redis_url))
    target.flushdb()
    unusable = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens: only the cache's LOCATION works
    caches = {**settings.CACHES, "jobs": {"BACKEND": "django_redis.cache.RedisCache",
                                          "LOCATION": cache_location(redis_url)}}
    try:
        with override_settings(CACHES=caches, DJWORK={**settings.DJWORK, "CACHE": "jobs", "REDIS_URL": unusable}):
            worker_jobs.record.delay("via-cache")
        assert target.connection_pool.connection_kwargs["db"] == CACHE_DATABASE
        _carry_one_job(workers, raw_redis, target, "via-cache", {"CACHE": "jobs", "REDIS_URL": unusable},
                       "--settings", "tests.settings_worker_cache")
        assert len(history_runs(target)) == 1
    finally:
        target.flushdb()
        target.close()


# --- unix:// ------------------------------------------------------------------------------------------
@pytest.fixture
def unix_server():
    server = RedisServer(unix_socket=True).start()
    try:
        yield server
    finally:
        server.stop()


def test_unix_socket_url(workers, raw_redis, unix_server):
    url = unix_server.url
    assert url.startswith("unix://") and url.endswith("?db=0")
    target = redis_py.Redis.from_url(url)
    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": url}):
        worker_jobs.record.delay("via-unix")
    _carry_one_job(workers, raw_redis, target, "via-unix", {"REDIS_URL": url})
    target.close()


# --- rediss:// ----------------------------------------------------------------------------------------
def _make_certificates(directory: Path) -> TlsFiles:
    """A throwaway CA and a server certificate it signed, for 127.0.0.1."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        _unavailable("the TLS test makes its certificates with the `cryptography` package (the `test` extra)")
    now = datetime.datetime.now(datetime.UTC)

    def key_usage(*, certificate_signing: bool) -> x509.KeyUsage:
        return x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                             data_encipherment=False, key_agreement=False, key_cert_sign=certificate_signing,
                             crl_sign=certificate_signing, encipher_only=False, decipher_only=False)

    def certificate(subject: str, public_key: Any, issuer: x509.Name, signing_key: Any) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                .issuer_name(issuer)
                .public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signing_key.public_key()),
                               critical=False))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "djwork test CA")])
    ca_cert = (certificate("djwork test CA", ca_key.public_key(), ca_name, ca_key)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(key_usage(certificate_signing=True), critical=True)
               .sign(ca_key, hashes.SHA256()))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (certificate("127.0.0.1", server_key.public_key(), ca_name, ca_key)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(key_usage(certificate_signing=False), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                   .add_extension(x509.SubjectAlternativeName([
                       x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                       critical=False)
                   .sign(ca_key, hashes.SHA256()))
    files = TlsFiles(cert_file=directory / "server.crt", key_file=directory / "server.key",
                     ca_file=directory / "ca.crt")
    files.ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert_file.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    files.key_file.write_bytes(server_key.private_bytes(serialization.Encoding.PEM,
                                                        serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()))
    return files


@pytest.fixture
def tls_server(tmp_path):
    certificates = tmp_path / "tls"
    certificates.mkdir()
    server = RedisServer(tls=_make_certificates(certificates))
    try:
        server.start()
    except RuntimeError as error:
        log = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
        server.stop()
        if any(marker in log for marker in TLS_UNSUPPORTED_MARKERS):
            _unavailable(f"this redis-server ({server.binary}) was built without TLS support:\n{log[-1000:]}")
        raise AssertionError(f"{error}\n{log[-2000:]}") from None
    try:
        yield server
    finally:
        server.stop()


def test_tls_url_with_a_ca_of_its_own(workers, raw_redis, tls_server):
    ca_file = tls_server.tls.ca_file
    url = f"{tls_server.url}?ssl_cert_reqs=required&ssl_ca_certs={ca_file}"
    # The URL's CA is what makes the chain verify: without it the handshake is refused.
    with pytest.raises(redis_py.ConnectionError):
        redis_py.Redis(host="127.0.0.1", port=tls_server.port, ssl=True, ssl_cert_reqs="required",
                       socket_timeout=5).ping()
    target = redis_py.Redis.from_url(url)
    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": url}):
        worker_jobs.record.delay("via-tls")
    _carry_one_job(workers, raw_redis, target, "via-tls", {"REDIS_URL": url})
    target.close()
