"""PyMongo against a Cairn started with access control (`--auth`).

    python auth_pymongo.py URI ROOT_USER ROOT_PASSWORD

URI points at a server started with `--auth` whose first user (root on admin) came from
`CAIRN_INITDB_ROOT_USERNAME`/`_PASSWORD`. Checks: logins with SCRAM-SHA-256 (the default, with
speculative authentication) and SCRAM-SHA-1; a wrong password and an unknown user fail alike
(OperationFailure 18 `Authentication failed.`); an unauthenticated client gets Unauthorized 13
`Command find requires authentication`; user management through PyMongo (`createUser`,
`usersInfo`, `updateUser`, `dropUser`) and a login as the new user; SASLprep'd passwords
(RFC 4013 via the driver spec's test users). Prints `ok`/`FAIL` lines and a closing count.
"""

from __future__ import annotations

import sys

from checks import check, expect, finish
from pymongo import MongoClient
from pymongo.errors import OperationFailure

if len(sys.argv) != 4:
    sys.exit(__doc__)
URI, ROOT, PWD = sys.argv[1], sys.argv[2], sys.argv[3]
HOSTPORT = URI.split("//", 1)[1].rstrip("/")
TIMEOUT_MS = 10_000


def client(user=None, pwd=None, **kw):
    if user is None:
        return MongoClient(URI, serverSelectionTimeoutMS=TIMEOUT_MS)
    return MongoClient(
        URI, username=user, password=pwd, authSource=kw.pop("authSource", "admin"),
        serverSelectionTimeoutMS=TIMEOUT_MS, **kw,
    )


def login_each_mechanism():
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-1", None):
        kw = {"authMechanism": mech} if mech else {}
        c = client(ROOT, PWD, **kw)
        coll = c.cairn_auth.c
        coll.replace_one({"_id": str(mech)}, {"_id": str(mech), "ok": True}, upsert=True)
        expect(coll.find_one({"_id": str(mech)})["ok"] is True, f"round trip with {mech}")
        c.close()
    return "SCRAM-SHA-256, SCRAM-SHA-1, negotiated"


def failures_look_alike():
    seen = []
    for user, pwd in ((ROOT, "wrong"), ("nobody", "x")):
        c = client(user, pwd)
        try:
            c.admin.command("ping")
        except OperationFailure as e:
            seen.append((e.code, str(e.details.get("errmsg"))))
        else:
            raise AssertionError(f"{user} logged in with a bad password")
        finally:
            c.close()
    expect(seen[0] == seen[1] == (18, "Authentication failed."), f"got {seen}")


def unauthenticated_is_refused():
    c = client()
    try:
        c.cairn_auth.c.find_one()
    except OperationFailure as e:
        expect(e.code == 13, f"code {e.code}")
        expect(e.details["errmsg"] == "Command find requires authentication", e.details["errmsg"])
    else:
        raise AssertionError("find ran without authentication")
    expect(c.admin.command("ping")["ok"] == 1.0, "ping is pre-auth")
    c.close()


def user_management():
    root = client(ROOT, PWD)
    db = root.cairn_auth
    db.command("createUser", "py_user", pwd="py-pwd", roles=["readWrite"], customData={"k": 1})
    info = db.command("usersInfo", "py_user")["users"]
    expect(len(info) == 1, f"usersInfo {info}")
    u = info[0]
    expect(u["_id"] == "cairn_auth.py_user" and u["db"] == "cairn_auth", f"{u}")
    expect(u["roles"] == [{"role": "readWrite", "db": "cairn_auth"}], f"{u['roles']}")
    expect(u["mechanisms"] == ["SCRAM-SHA-1", "SCRAM-SHA-256"], f"{u['mechanisms']}")
    expect("credentials" not in u, "credentials hidden by default")
    try:
        db.command("createUser", "py_user", pwd="x", roles=[])
    except OperationFailure as e:
        expect(e.code == 51003, f"duplicate code {e.code}")
    else:
        raise AssertionError("duplicate createUser succeeded")
    me = client("py_user", "py-pwd", authSource="cairn_auth")
    me.cairn_auth.c.insert_one({"by": "py_user"})
    me.close()
    db.command("updateUser", "py_user", pwd="py-pwd-2")
    me = client("py_user", "py-pwd-2", authSource="cairn_auth")
    expect(me.cairn_auth.command("ping")["ok"] == 1.0, "new password works")
    me.close()
    db.command("dropUser", "py_user")
    try:
        db.command("dropUser", "py_user")
    except OperationFailure as e:
        expect(e.code == 11, f"drop missing code {e.code}")
    root.close()


def saslprep_users():
    # The driver spec's SASLprep users (auth.md test plan step 4).
    root = client(ROOT, PWD)
    root.admin.command("createUser", "IX", pwd="IX", roles=[], mechanisms=["SCRAM-SHA-256"])
    root.admin.command("createUser", "\u2168", pwd="\u2163", roles=[], mechanisms=["SCRAM-SHA-256"])
    try:
        for user, pwd in (("IX", "IX"), ("IX", "I\u00adX"), ("\u2168", "IV"), ("\u2168", "I\u00adV")):
            c = client(user, pwd, authMechanism="SCRAM-SHA-256")
            expect(c.admin.command("ping")["ok"] == 1.0, f"{user!r}/{pwd!r}")
            c.close()
    finally:
        root.admin.command("dropUser", "IX")
        root.admin.command("dropUser", "\u2168")
        root.close()


check("PyMongo logs in with SCRAM-SHA-256 and SCRAM-SHA-1", login_each_mechanism)
check("PyMongo: wrong password and unknown user give the same error 18", failures_look_alike)
check("PyMongo: an unauthenticated find is Unauthorized 13", unauthenticated_is_refused)
check("PyMongo: createUser/usersInfo/updateUser/dropUser and a login as the new user", user_management)
check("PyMongo: SASLprep'd passwords (RFC 4013 users)", saslprep_users)
finish("auth_pymongo")
