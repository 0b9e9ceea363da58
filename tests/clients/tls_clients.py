"""PyMongo and mongosh over TLS against a Cairn started with --tls-mode requireTLS.

    python tls_clients.py /path/to/cairn WORKDIR /path/to/mongosh

Makes a throwaway PKI with the openssl CLI (a CA; a server certificate for localhost and
127.0.0.1; a client certificate), starts its own Cairn in requireTLS mode with that CA as
--tls-ca-file and --tls-allow-connections-without-certificates, and checks:
- PyMongo with `tls=True, tlsCAFile` (and with a client certificate) inserts and reads back;
- a plain PyMongo client and a client trusting another CA are refused;
- `rotateCertificates` switches new connections to a certificate from a second CA;
- mongosh `--tls --tlsCAFile` runs commands, and without `--tls` it cannot connect;
- against a second server with `--auth` (and the same PKI): PyMongo SCRAM-SHA-256/SHA-1 over
  TLS, PyMongo MONGODB-X509 with the client certificate (its RFC 2253 subject as the `$external`
  user, read-only role enforced), mongosh SCRAM over TLS.

Prints one `ok`/`FAIL` line per check and a closing `tls: N passed, N failed` line. The server
is always stopped on exit. Started by tests/clients/run.sh.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import time

from checks import check, expect, finish
from pymongo import MongoClient
from pymongo.errors import PyMongoError

if len(sys.argv) != 4:
    sys.exit(__doc__)
BIN, WORKDIR, MONGOSH = sys.argv[1], sys.argv[2], sys.argv[3]
PKI = os.path.join(WORKDIR, "pki")
os.makedirs(PKI, exist_ok=True)


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(name):
    key, crt = os.path.join(PKI, f"{name}.key"), os.path.join(PKI, f"{name}.pem")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
            "-days", "2", "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return key, crt


def issue(ca, name, ext):
    """A certificate signed by `ca`, as `name`.pem holding the certificate and then its key."""
    ca_key, ca_crt = ca
    key, csr, crt = (os.path.join(PKI, f"{name}.{e}") for e in ("key", "csr", "crt"))
    extfile = os.path.join(PKI, f"{name}.ext")
    with open(extfile, "w") as f:
        f.write(ext)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
            "-subj", f"/O=Cairn/OU=tests/CN={name}")
    openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
            "-out", crt, "-days", "2", "-extfile", extfile)
    pem = os.path.join(PKI, f"{name}.pem")
    with open(pem, "w") as out:
        for part in (crt, key):
            with open(part) as f:
                out.write(f.read())
    return pem


SERVER_EXT = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
CLIENT_EXT = "extendedKeyUsage=clientAuth\n"
ca1 = make_ca("ca1")
ca2 = make_ca("ca2")
server1 = issue(ca1, "server1", SERVER_EXT)
server2 = issue(ca2, "server2", SERVER_EXT)
client1 = issue(ca1, "client1", CLIENT_EXT)
# The files the server reads; rotation rewrites them.
KEY_FILE, CA_FILE = os.path.join(PKI, "server.pem"), os.path.join(PKI, "ca.pem")
shutil.copy(server1, KEY_FILE)
shutil.copy(ca1[1], CA_FILE)

# --- the server -------------------------------------------------------------------------------

PORT_LINE = re.compile(r'"msg":"Waiting for connections".*"port":(\d+)')


def start_server(name, args, env=None):
    """Starts a Cairn on a free port with its own data directory; returns (process, port)."""
    log_path = os.path.join(WORKDIR, f"{name}.log")
    data = os.path.join(WORKDIR, f"{name}-data")
    os.makedirs(data, exist_ok=True)
    with open(log_path, "wb") as log:
        p = subprocess.Popen(
            [BIN, "--port", "0", "--log-format", "json", "--data-dir", data, *args],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, **(env or {})),
        )

    def stop():
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    atexit.register(stop)
    t0 = time.monotonic()
    while True:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            m = PORT_LINE.search(f.read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None or time.monotonic() - t0 > 30:
            sys.exit(f"FAIL - the {name} server did not start (status {p.poll()})")
        time.sleep(0.05)


proc, port = start_server(
    "server", ["--tls-mode", "requireTLS", "--tls-certificate-key-file", KEY_FILE,
               "--tls-ca-file", CA_FILE, "--tls-allow-connections-without-certificates"])


def client(**kw):
    return MongoClient("localhost", port, serverSelectionTimeoutMS=3000, **kw)


def tls_round_trip():
    c = client(tls=True, tlsCAFile=ca1[1])
    coll = c.cairn_tls.c
    coll.insert_one({"_id": 1, "s": "x" * 50_000})
    doc = coll.find_one({"_id": 1})
    expect(len(doc["s"]) == 50_000, f"read back {doc!r:.80}")
    ts = c.admin.command("serverStatus")["transportSecurity"]
    expect(ts["1.3"] >= 1, f"transportSecurity {ts}")
    return f"transportSecurity {dict(ts)}"


def tls_with_client_certificate():
    c = client(tls=True, tlsCAFile=ca1[1], tlsCertificateKeyFile=client1)
    expect(c.admin.command("ping")["ok"] == 1.0, "ping")
    expect(c.cairn_tls.c.count_documents({}) == 1, "count")


def refused(**kw):
    try:
        client(**kw).admin.command("ping")
    except PyMongoError as e:
        return type(e).__name__
    raise AssertionError("the client connected")


def rotation():
    shutil.copy(server2, KEY_FILE)
    shutil.copy(ca2[1], CA_FILE)
    r = client(tls=True, tlsCAFile=ca1[1]).admin.command("rotateCertificates", message="py")
    expect(r["ok"] == 1.0, f"rotateCertificates {r}")
    expect(client(tls=True, tlsCAFile=ca2[1]).admin.command("ping")["ok"] == 1.0, "new CA")
    refused(tls=True, tlsCAFile=ca1[1])


def mongosh(*args, uri=None):
    home = os.path.join(WORKDIR, "home")
    os.makedirs(home, exist_ok=True)
    conf = os.path.join(WORKDIR, "mongosh.conf")
    with open(conf, "w") as f:
        f.write("mongosh:\n  forceDisableTelemetry: true\n  updateURL: ''\n")
    env = dict(os.environ, HOME=home, MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING=conf)
    uri = uri or f"mongodb://localhost:{port}/?serverSelectionTimeoutMS=3000"
    return subprocess.run([MONGOSH, uri, "--quiet", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def mongosh_tls():
    r = mongosh("--tls", "--tlsCAFile", ca2[1], "--eval",
                "db.getSiblingDB('cairn_tls').c.countDocuments({})")
    expect(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-500:]}")
    expect(r.stdout.strip() == "1", f"stdout {r.stdout!r}")


def mongosh_plain_refused():
    r = mongosh("--eval", "db.runCommand({ping: 1}).ok")
    expect(r.returncode != 0, f"plain mongosh connected: {r.stdout!r}")
    expect("Error parsing command line" not in r.stderr, f"usage error: {r.stderr[-300:]}")
    expect("MongoServerSelectionError" in r.stderr + r.stdout or "ECONNRESET" in r.stderr
           + r.stdout, f"not a connection failure: {(r.stderr + r.stdout)[-300:]}")


# --- a second server with access control: SCRAM and MONGODB-X509 over TLS ---------------------

_, auth_port = start_server(
    "auth-server", ["--auth", "--tls-mode", "requireTLS", "--tls-certificate-key-file", server1,
                    "--tls-ca-file", ca1[1], "--tls-allow-connections-without-certificates"],
    env={"CAIRN_INITDB_ROOT_USERNAME": "root", "CAIRN_INITDB_ROOT_PASSWORD": "pw"})


def auth_client(**kw):
    return MongoClient("localhost", auth_port, serverSelectionTimeoutMS=3000, tls=True,
                       tlsCAFile=ca1[1], **kw)


def scram_over_tls():
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-1"):
        c = auth_client(username="root", password="pw", authSource="admin", authMechanism=mech)
        c.app.c.insert_one({"mech": mech})
        expect(c.app.c.count_documents({"mech": mech}) == 1, mech)


def x509_over_tls():
    out = subprocess.run(["openssl", "x509", "-noout", "-subject", "-nameopt", "RFC2253",
                          "-in", client1], check=True, capture_output=True, text=True).stdout
    subject = out.strip().removeprefix("subject=").strip()
    root = auth_client(username="root", password="pw", authSource="admin")
    root["$external"].command("createUser", subject, roles=[{"role": "read", "db": "app"}])
    c = auth_client(tlsCertificateKeyFile=client1, authMechanism="MONGODB-X509")
    expect(c.app.c.count_documents({}) >= 1, "read as the certificate's user")
    status = c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]
    expect(status == [{"user": subject, "db": "$external"}], f"users {status}")
    try:
        c.app.c.insert_one({"x": 1})
        raise AssertionError("a read-only X.509 user inserted")
    except PyMongoError as e:
        expect(getattr(e, "code", None) == 13, f"{e}")
    return subject


def mongosh_scram_over_tls():
    uri = (f"mongodb://root:pw@localhost:{auth_port}/?authSource=admin"
           "&serverSelectionTimeoutMS=3000")
    r = mongosh("--tls", "--tlsCAFile", ca1[1], "--eval",
                "db.getSiblingDB('app').c.countDocuments({})", uri=uri)
    expect(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-500:]}")
    expect(int(r.stdout.strip()) >= 2, f"stdout {r.stdout!r}")


check("PyMongo SCRAM-SHA-256 and SCRAM-SHA-1 over TLS (--auth, requireTLS)", scram_over_tls)
check("PyMongo MONGODB-X509: the client certificate's subject on $external", x509_over_tls)
check("mongosh SCRAM over TLS", mongosh_scram_over_tls)
check("PyMongo tls=True, tlsCAFile: insert and read back 50 kB", tls_round_trip)
check("PyMongo with a client certificate (tlsCertificateKeyFile)", tls_with_client_certificate)
check("PyMongo without tls is refused by requireTLS", lambda: refused())
check("PyMongo trusting another CA is refused", lambda: refused(tls=True, tlsCAFile=ca2[1]))
check("rotateCertificates: new connections get the new certificate", rotation)
check("mongosh --tls --tlsCAFile runs a query", mongosh_tls)
check("mongosh without --tls cannot connect", mongosh_plain_refused)
check("the server is still running", lambda: expect(proc.poll() is None, "exited"))
finish("tls")
