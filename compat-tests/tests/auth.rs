//! Authentication through the official Rust driver and raw SASL conversations: SCRAM-SHA-256
//! and SCRAM-SHA-1 logins, MongoDB's generic failure, speculative authentication,
//! `saslSupportedMechs`, the `--auth` gate on every registered command, the localhost
//! exception, logout, the user commands' data and errors, the init-root variables, the
//! failure delay and the redaction of secrets.

use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bson::{Binary, Bson, RawDocumentBuf, doc, rawdoc, spec::BinarySubtype};
use cairn_compat_tests::{RawConn, TestServer, cairn_bin, code_of};
use hmac::{KeyInit, Mac};
use sha2::Digest;

const ROOT: &str = "root";
const ROOT_PWD: &str = "r00t-pass";

fn auth_server() -> TestServer {
    TestServer::start_with_env(
        &["--auth"],
        &[
            ("CAIRN_INITDB_ROOT_USERNAME", ROOT),
            ("CAIRN_INITDB_ROOT_PASSWORD", ROOT_PWD),
        ],
    )
}

async fn login(s: &TestServer, user: &str, pwd: &str, extra: &str) -> mongodb::Client {
    s.login(user, pwd, extra).await
}

async fn root(s: &TestServer) -> mongodb::Client {
    login(s, ROOT, ROOT_PWD, "").await
}

async fn anonymous(s: &TestServer) -> mongodb::Client {
    s.client().await
}

fn error_of(r: &RawDocumentBuf) -> (i32, String, String) {
    (
        r.get_i32("code").unwrap_or(-1),
        r.get_str("codeName").unwrap_or_default().to_string(),
        r.get_str("errmsg").unwrap_or_default().to_string(),
    )
}

fn failed18() -> (i32, String, String) {
    (
        18,
        "AuthenticationFailed".to_string(),
        "Authentication failed.".to_string(),
    )
}

fn bin(b: &[u8]) -> Binary {
    Binary {
        subtype: BinarySubtype::Generic,
        bytes: b.to_vec(),
    }
}

/// A SCRAM-SHA-256 client for raw conversations.
struct Scram {
    user: String,
    pwd: String,
    nonce: String,
    first_bare: String,
    auth_message: String,
    server_key: Vec<u8>,
}

fn hmac256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).unwrap();
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

impl Scram {
    fn new(user: &str, pwd: &str) -> Scram {
        let nonce = "clientNonce0123456789";
        Scram {
            user: user.into(),
            pwd: pwd.into(),
            nonce: nonce.into(),
            first_bare: format!("n={user},r={nonce}"),
            auth_message: String::new(),
            server_key: Vec::new(),
        }
    }

    fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.first_bare).into_bytes()
    }

    fn final_message(&mut self, server_first: &[u8]) -> Vec<u8> {
        let sf = std::str::from_utf8(server_first).unwrap();
        let mut parts = sf.split(',');
        let r = parts.next().unwrap().strip_prefix("r=").unwrap();
        let s = parts.next().unwrap().strip_prefix("s=").unwrap();
        let i: u32 = parts
            .next()
            .unwrap()
            .strip_prefix("i=")
            .unwrap()
            .parse()
            .unwrap();
        assert!(r.starts_with(&self.nonce), "server nonce extends ours");
        assert_eq!(r.len(), self.nonce.len() + 32, "24 random bytes in base64");
        let salt = B64.decode(s).unwrap();
        assert_eq!(salt.len(), 28, "SHA-256 salts are 28 bytes");
        let mut salted = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<sha2::Sha256>(self.pwd.as_bytes(), &salt, i, &mut salted);
        let client_key = hmac256(&salted, b"Client Key");
        let stored = sha2::Sha256::digest(&client_key).to_vec();
        let without_proof = format!("c=biws,r={r}");
        self.auth_message = format!("{},{sf},{without_proof}", self.first_bare);
        let sig = hmac256(&stored, self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        self.server_key = hmac256(&salted, b"Server Key");
        let _ = &self.user;
        format!("{without_proof},p={}", B64.encode(proof)).into_bytes()
    }

    fn expected_server_final(&self) -> Vec<u8> {
        format!(
            "v={}",
            B64.encode(hmac256(&self.server_key, self.auth_message.as_bytes()))
        )
        .into_bytes()
    }
}

/// `{<name>: 1, $db: <db>}`.
fn cmd_doc(name: &str, db: &str) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    d.append(<&bson::raw::CStr>::try_from(name).unwrap(), 1);
    d.append(bson::raw::cstr!("$db"), db);
    d
}

fn payload_of(r: &RawDocumentBuf) -> Vec<u8> {
    r.get_binary("payload").expect("payload").bytes.to_vec()
}

/// Runs a whole SCRAM-SHA-256 conversation on `c`; returns the replies.
async fn raw_login(
    c: &mut RawConn,
    user: &str,
    pwd: &str,
    skip_empty: bool,
) -> Vec<RawDocumentBuf> {
    let mut sc = Scram::new(user, pwd);
    let r1 = c
        .command(
            rawdoc! {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin(&sc.first()),
            "autoAuthorize": 1, "options": {"skipEmptyExchange": skip_empty}, "$db": "admin"},
        )
        .await;
    if r1.get_f64("ok").unwrap_or(0.0) != 1.0 {
        return vec![r1];
    }
    let fin = sc.final_message(&payload_of(&r1));
    let r2 = c
        .command(
            rawdoc! {"saslContinue": 1, "conversationId": 1, "payload": bin(&fin), "$db": "admin"},
        )
        .await;
    if r2.get_f64("ok").unwrap_or(0.0) == 1.0 {
        assert_eq!(payload_of(&r2), sc.expected_server_final());
    }
    let mut out = vec![r1, r2];
    if !skip_empty && out[1].get_bool("done").ok() == Some(false) {
        let r3 = c
            .command(rawdoc! {"saslContinue": 1, "conversationId": 1, "payload": bin(b""), "$db": "admin"})
            .await;
        out.push(r3);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn driver_logs_in_with_each_scram_mechanism() {
    let s = auth_server();
    for extra in [
        "",
        "&authMechanism=SCRAM-SHA-256",
        "&authMechanism=SCRAM-SHA-1",
    ] {
        let c = login(&s, ROOT, ROOT_PWD, extra).await;
        let coll = c.database("app").collection::<bson::Document>("c");
        coll.insert_one(doc! {"_id": extra, "x": 1})
            .await
            .unwrap_or_else(|e| panic!("insert with {extra:?}: {e}"));
        let got = coll.find_one(doc! {"_id": extra}).await.unwrap().unwrap();
        assert_eq!(got.get_i32("x").unwrap(), 1);
    }
    // The server log names the mechanism of each success and never the password.
    let log = s.log_with("SCRAM-SHA-1").await;
    assert!(log.contains("Authentication succeeded"));
    assert!(!log.contains(ROOT_PWD));
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_password_and_unknown_user_fail_alike() {
    let s = auth_server();
    // Through the driver: both fail with AuthenticationFailed.
    for (user, pwd) in [(ROOT, "wrong"), ("nobody", "x")] {
        let c = login(&s, user, pwd, "").await;
        let e = c
            .database("app")
            .run_command(doc! {"ping": 1})
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("Authentication failed"), "{user}: {text}");
    }
    // Raw: the replies are identical.
    let mut c = s.raw().await;
    let unknown = raw_login(&mut c, "nobody", "x", true).await;
    assert_eq!(unknown.len(), 1, "saslStart fails for an unknown user");
    let mut c = s.raw().await;
    let wrong = raw_login(&mut c, ROOT, "wrong", true).await;
    assert_eq!(wrong.len(), 2, "saslContinue fails for a wrong password");
    assert_eq!(error_of(&unknown[0]), failed18());
    assert_eq!(error_of(&wrong[1]), failed18());
    // A failed conversation leaves the connection unauthenticated.
    let r = c.command(rawdoc! {"find": "c", "$db": "app"}).await;
    assert_eq!(r.get_i32("code").unwrap(), 13);
}

#[tokio::test(flavor = "multi_thread")]
async fn raw_conversation_with_and_without_the_empty_exchange() {
    let s = auth_server();
    for skip in [true, false] {
        let mut c = s.raw().await;
        let before = c.command(rawdoc! {"find": "c", "$db": "app"}).await;
        assert_eq!(
            error_of(&before),
            (
                13,
                "Unauthorized".into(),
                "Command find requires authentication".into()
            )
        );
        let replies = raw_login(&mut c, ROOT, ROOT_PWD, skip).await;
        assert_eq!(replies.len(), if skip { 2 } else { 3 });
        for r in &replies {
            assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{r:?}");
            assert_eq!(r.get_i32("conversationId").unwrap(), 1);
        }
        assert!(!replies[0].get_bool("done").unwrap());
        assert!(replies.last().unwrap().get_bool("done").unwrap());
        if !skip {
            assert!(!replies[1].get_bool("done").unwrap());
            assert!(payload_of(&replies[2]).is_empty());
        }
        let after = c.command(rawdoc! {"find": "c", "$db": "app"}).await;
        assert_eq!(after.get_f64("ok").unwrap(), 1.0, "{after:?}");
    }
    // Protocol errors pass through unchanged.
    let mut c = s.raw().await;
    let sc = Scram::new(ROOT, ROOT_PWD);
    c.command(rawdoc! {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin(&sc.first()), "$db": "admin"})
        .await;
    let r = c
        .command(
            rawdoc! {"saslContinue": 1, "conversationId": 2, "payload": bin(b"x"), "$db": "admin"},
        )
        .await;
    assert_eq!(
        error_of(&r),
        (
            17,
            "ProtocolError".into(),
            "sasl: Mismatched conversation id".into()
        )
    );
    // Unsupported mechanisms are MechanismUnavailable; bad options BadValue.
    let r = c
        .command(
            rawdoc! {"saslStart": 1, "mechanism": "PLAIN", "payload": bin(b"x"), "$db": "admin"},
        )
        .await;
    assert_eq!(
        error_of(&r),
        (
            334,
            "MechanismUnavailable".into(),
            "Unsupported mechanism 'PLAIN' on authentication database 'admin'".into()
        )
    );
    let r = c
        .command(
            rawdoc! {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin(&sc.first()),
            "options": {"skipEmptyExchange": 1}, "$db": "admin"},
        )
        .await;
    assert_eq!(error_of(&r).2, "skipEmptyExchange must be boolean");
    // A base64 string payload is answered in kind.
    let r = c
        .command(rawdoc! {"saslStart": 1, "mechanism": "SCRAM-SHA-256",
        "payload": B64.encode(sc.first()), "$db": "admin"})
        .await;
    let p = r.get_str("payload").expect("string payload");
    assert!(B64.decode(p).unwrap().starts_with(b"r=clientNonce"));
    // `authenticate`: MONGODB-X509 needs TLS (a protocol error on a plain connection, see
    // tls.rs for it over TLS); other mechanisms are generic failures.
    let r = c
        .command(rawdoc! {"authenticate": 1, "mechanism": "MONGODB-X509", "$db": "$external"})
        .await;
    assert_eq!(
        error_of(&r),
        (
            17,
            "ProtocolError".to_string(),
            "SSL support is required for the MONGODB-X509 mechanism.".to_string()
        )
    );
    for mech in ["MONGODB-CR", "SCRAM-SHA-256"] {
        let r = c
            .command(rawdoc! {"authenticate": 1, "mechanism": mech, "$db": "$external"})
            .await;
        assert_eq!(error_of(&r), failed18(), "{mech}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn speculative_authentication_and_supported_mechanisms() {
    let s = auth_server();
    let admin = root(&s).await.database("admin");
    admin
        .run_command(doc! {"createUser": "only256", "pwd": "p256", "roles": [], "mechanisms": ["SCRAM-SHA-256"]})
        .await
        .unwrap();
    let mut c = s.raw().await;
    let mut sc = Scram::new(ROOT, ROOT_PWD);
    let hello = c
        .command(rawdoc! {
        "hello": 1, "saslSupportedMechs": "admin.root",
        "speculativeAuthenticate": {"saslStart": 1, "mechanism": "SCRAM-SHA-256",
            "payload": bin(&sc.first()), "options": {"skipEmptyExchange": true}, "db": "admin"},
        "$db": "admin"})
        .await;
    assert_eq!(hello.get_f64("ok").unwrap(), 1.0);
    let mechs: Vec<&str> = hello
        .get_array("saslSupportedMechs")
        .unwrap()
        .into_iter()
        .map(|v| v.unwrap().as_str().unwrap())
        .collect();
    assert_eq!(mechs, ["SCRAM-SHA-1", "SCRAM-SHA-256"]);
    let spec = hello.get_document("speculativeAuthenticate").unwrap();
    assert_eq!(spec.get_i32("conversationId").unwrap(), 1);
    assert!(!spec.get_bool("done").unwrap());
    assert!(spec.get("ok").unwrap().is_none());
    let fin = sc.final_message(spec.get_binary("payload").unwrap().bytes);
    let r = c
        .command(
            rawdoc! {"saslContinue": 1, "conversationId": 1, "payload": bin(&fin), "$db": "admin"},
        )
        .await;
    assert!(r.get_bool("done").unwrap());
    let r = c.command(rawdoc! {"find": "c", "$db": "app"}).await;
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);

    // Unknown users: no saslSupportedMechs, no speculativeAuthenticate, and hello succeeds.
    let mut c = s.raw().await;
    let sc = Scram::new("nobody", "x");
    let hello = c
        .command(rawdoc! {
        "hello": 1, "saslSupportedMechs": "admin.nobody",
        "speculativeAuthenticate": {"saslStart": 1, "mechanism": "SCRAM-SHA-256",
            "payload": bin(&sc.first()), "db": "admin"},
        "$db": "admin"})
        .await;
    assert_eq!(hello.get_f64("ok").unwrap(), 1.0);
    assert!(hello.get("saslSupportedMechs").unwrap().is_none());
    assert!(hello.get("speculativeAuthenticate").unwrap().is_none());
    let hello = c
        .command(rawdoc! {"hello": 1, "saslSupportedMechs": "admin.only256", "$db": "admin"})
        .await;
    let mechs: Vec<&str> = hello
        .get_array("saslSupportedMechs")
        .unwrap()
        .into_iter()
        .map(|v| v.unwrap().as_str().unwrap())
        .collect();
    assert_eq!(mechs, ["SCRAM-SHA-256"]);
    // The user lacks SHA-1 credentials: forcing SCRAM-SHA-1 fails.
    let e = login(&s, "only256", "p256", "&authMechanism=SCRAM-SHA-1")
        .await
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap_err();
    assert!(e.to_string().contains("SCRAM-SHA-1"), "{e}");
    login(&s, "only256", "p256", "")
        .await
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
}

/// Commands that run before authentication in MongoDB 7.0 (listCommands `requiresAuth:
/// false`), with their aliases.
const PRE_AUTH: &[&str] = &[
    "authenticate",
    "buildInfo",
    "connectionStatus",
    "hello",
    "isMaster",
    "listCommands",
    "ping",
    "saslContinue",
    "saslStart",
];

#[tokio::test(flavor = "multi_thread")]
async fn every_command_but_the_pre_auth_set_refuses_an_unauthenticated_client() {
    let s = auth_server();
    let mut raw = s.raw().await;
    let list = raw
        .command(rawdoc! {"listCommands": 1, "$db": "admin"})
        .await;
    let commands = list
        .get_document("commands")
        .expect("listCommands works before auth");
    let anon = anonymous(&s).await;
    let mut pre_auth = Vec::new();
    let mut refused = 0;
    for entry in commands {
        let (name, info) = entry.unwrap();
        let name = name.as_str();
        let requires = info
            .as_document()
            .unwrap()
            .get_bool("requiresAuth")
            .unwrap();
        if !requires {
            pre_auth.push(name.to_string());
            continue;
        }
        // Through the driver, on admin so admin-only commands reach the gate.
        let mut cmd = bson::Document::new();
        cmd.insert(name, Bson::Int32(1));
        let e = anon
            .database("admin")
            .run_command(cmd)
            .await
            .expect_err(name);
        assert_eq!(code_of(&e), 13, "{name}: {e}");
        let mongodb::error::ErrorKind::Command(ce) = &*e.kind else {
            panic!("{name}: {e}")
        };
        assert_eq!(
            ce.message,
            format!("Command {name} requires authentication")
        );
        assert_eq!(ce.code_name, "Unauthorized");
        refused += 1;
    }
    pre_auth.sort();
    assert_eq!(pre_auth, PRE_AUTH);
    assert!(refused > 50, "{refused}");
    // Unknown commands and admin-only misuse are answered before the gate.
    for (name, db, code) in [
        ("getnonce", "admin", 59),
        ("noSuchCommand", "admin", 59),
        ("listDatabases", "app", 13),
    ] {
        let r = raw.command(cmd_doc(name, db)).await;
        assert_eq!(r.get_i32("code").unwrap(), code, "{name}");
    }
    let r = raw
        .command(rawdoc! {"listDatabases": 1, "$db": "app"})
        .await;
    assert_eq!(
        r.get_str("errmsg").unwrap(),
        "listDatabases may only be run against the admin database."
    );
    // endSessions and logout are not pre-auth in 7.0.
    for name in ["endSessions", "logout", "startSession", "whatsmyuri"] {
        let r = raw.command(cmd_doc(name, "admin")).await;
        assert_eq!(r.get_i32("code").unwrap(), 13, "{name}");
    }
    // The pre-auth commands answer.
    for name in ["ping", "buildInfo", "hello", "isMaster", "connectionStatus"] {
        let r = raw.command(cmd_doc(name, "admin")).await;
        assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{name}: {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn localhost_exception_until_the_first_user() {
    let s = TestServer::start_with(&["--auth"]);
    let anon = anonymous(&s).await;
    let admin = anon.database("admin");
    // No user yet: a loopback client passes the authentication gate.
    admin.run_command(doc! {"listDatabases": 1}).await.unwrap();
    admin
        .run_command(doc! {"createUser": "first", "pwd": "first-pwd", "roles": ["root"]})
        .await
        .unwrap();
    let e = admin
        .run_command(doc! {"listDatabases": 1})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 13);
    let e = admin
        .run_command(doc! {"createUser": "second", "pwd": "x", "roles": []})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 13);
    login(&s, "first", "first-pwd", "")
        .await
        .database("admin")
        .run_command(doc! {"listDatabases": 1})
        .await
        .unwrap();
    s.log_with("allowing localhost access").await;
    // Without --auth there is nothing to authenticate against and everything runs.
    let open = TestServer::start();
    open.client()
        .await
        .database("admin")
        .run_command(doc! {"listDatabases": 1})
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn logout_ends_the_connections_authentication() {
    let s = auth_server();
    let mut c = s.raw().await;
    let r = c.command(rawdoc! {"logout": 1, "$db": "admin"}).await;
    assert_eq!(
        r.get_i32("code").unwrap(),
        13,
        "logout requires authentication"
    );
    raw_login(&mut c, ROOT, ROOT_PWD, true).await;
    // A logout on another database leaves the admin user in place.
    let r = c.command(rawdoc! {"logout": 1, "$db": "app"}).await;
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    let r = c.command(rawdoc! {"find": "c", "$db": "app"}).await;
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    let r = c.command(rawdoc! {"logout": 1, "$db": "admin"}).await;
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    let r = c.command(rawdoc! {"find": "c", "$db": "app"}).await;
    assert_eq!(r.get_i32("code").unwrap(), 13);
    // A second, different user on one connection is refused; the same user again is fine.
    raw_login(&mut c, ROOT, ROOT_PWD, true).await;
    let again = raw_login(&mut c, ROOT, ROOT_PWD, true).await;
    assert!(again[1].get_bool("done").unwrap());
    root(&s)
        .await
        .database("admin")
        .run_command(
            doc! {"createUser": "other", "pwd": "o", "roles": [{"role": "read", "db": "app"}]},
        )
        .await
        .unwrap();
    let other = raw_login(&mut c, "other", "o", true).await;
    assert_eq!(error_of(&other[1]), failed18());
    // A dropped user is logged out of its connections at their next command.
    let mut o = s.raw().await;
    raw_login(&mut o, "other", "o", true).await;
    let r = o.command(rawdoc! {"find": "c", "$db": "app"}).await;
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    root(&s)
        .await
        .database("admin")
        .run_command(doc! {"dropUser": "other"})
        .await
        .unwrap();
    let r = o.command(rawdoc! {"find": "c", "$db": "app"}).await;
    assert_eq!(r.get_i32("code").unwrap(), 13, "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn user_commands_store_and_describe_users() {
    let s = auth_server();
    let rc = root(&s).await;
    let app = rc.database("app");
    let run = |db: &mongodb::Database, d: bson::Document| {
        let db = db.clone();
        async move { db.run_command(d).await }
    };
    run(
        &app,
        doc! {"createUser": "alice", "pwd": "a-pwd", "roles": ["readWrite", {"role": "read", "db": "other"}],
              "customData": {"team": "x"}},
    )
    .await
    .unwrap();
    // Stored document: MongoDB's shape, salted keys only.
    let stored = rc
        .database("admin")
        .collection::<bson::Document>("system.users")
        .find_one(doc! {"_id": "app.alice"})
        .await
        .unwrap()
        .expect("stored");
    let keys: Vec<&str> = stored.keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "_id",
            "userId",
            "user",
            "db",
            "credentials",
            "customData",
            "roles"
        ]
    );
    assert!(
        matches!(stored.get("userId"), Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid)
    );
    let creds = stored.get_document("credentials").unwrap();
    let sha1 = creds.get_document("SCRAM-SHA-1").unwrap();
    let sha256 = creds.get_document("SCRAM-SHA-256").unwrap();
    assert_eq!(sha1.get_i32("iterationCount").unwrap(), 10000);
    assert_eq!(sha256.get_i32("iterationCount").unwrap(), 15000);
    assert_eq!(B64.decode(sha1.get_str("salt").unwrap()).unwrap().len(), 16);
    assert_eq!(
        B64.decode(sha256.get_str("salt").unwrap()).unwrap().len(),
        28
    );
    assert!(!format!("{stored:?}").contains("a-pwd"));
    assert_eq!(
        stored.get_array("roles").unwrap(),
        &vec![
            Bson::Document(doc! {"role": "readWrite", "db": "app"}),
            Bson::Document(doc! {"role": "read", "db": "other"})
        ]
    );

    // Errors, in MongoDB's codes and words.
    let err = |r: Result<bson::Document, mongodb::error::Error>| {
        let e = r.unwrap_err();
        let mongodb::error::ErrorKind::Command(c) = &*e.kind else {
            panic!("{e}")
        };
        (c.code, c.message.clone())
    };
    assert_eq!(
        err(run(&app, doc! {"createUser": "alice", "pwd": "x", "roles": []}).await),
        (51003, "User \"alice@app\" already exists".into())
    );
    assert_eq!(
        err(run(
            &app,
            doc! {"createUser": "bob", "pwd": "x", "roles": ["nope"]}
        )
        .await),
        (31, "Could not find role: nope@app".into())
    );
    assert_eq!(
        err(run(
            &app,
            doc! {"createUser": "bob", "pwd": "x", "roles": [{"role": "root", "db": "app"}]}
        )
        .await)
        .0,
        31
    );
    assert_eq!(
        err(run(&app, doc! {"createUser": "bob", "roles": []}).await).1,
        "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db"
    );
    assert_eq!(
        err(run(&app, doc! {"createUser": "bob", "pwd": "x"}).await).0,
        40414
    );
    assert_eq!(
        err(run(
            &rc.database("local"),
            doc! {"createUser": "bob", "pwd": "x", "roles": []}
        )
        .await),
        (2, "Cannot create users in the local database".into())
    );
    assert_eq!(
        err(run(
            &app,
            doc! {"createUser": "bob", "pwd": "x", "roles": [], "mechanisms": []}
        )
        .await)
        .1,
        "mechanisms field must not be empty"
    );
    assert_eq!(
        err(run(
            &app,
            doc! {"createUser": "bob", "pwd": "x", "roles": [], "mechanisms": ["MD5"]}
        )
        .await)
        .1,
        "Unknown auth mechanism 'MD5'"
    );
    assert_eq!(
        err(run(&app, doc! {"dropUser": "ghost"}).await),
        (11, "User 'ghost@app' not found".into())
    );
    assert_eq!(
        err(run(&app, doc! {"updateUser": "ghost", "customData": {}}).await),
        (11, "User ghost@app not found".into())
    );
    assert_eq!(
        err(run(&app, doc! {"updateUser": "alice"}).await),
        (
            2,
            "Must specify at least one field to update in updateUser".into()
        )
    );
    assert_eq!(
        err(run(&app, doc! {"grantRolesToUser": "alice", "roles": []}).await),
        (
            2,
            "grantRolesToUser command requires a non-empty \"roles\" array".into()
        )
    );
    assert_eq!(
        err(run(&app, doc! {"grantRolesToUser": "ghost", "roles": ["read"]}).await).0,
        11
    );
    assert_eq!(
        err(run(&app, doc! {"usersInfo": 1, "showPrivileges": true}).await).0,
        20
    );
    // On an exact match: the roles held (here, exactly the granted ones) and their privileges.
    let shown = run(&app, doc! {"usersInfo": "alice", "showPrivileges": true})
        .await
        .unwrap();
    let u = shown.get_array("users").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    let mut held: Vec<bson::Bson> = u.get_array("roles").unwrap().clone();
    let mut inherited = u.get_array("inheritedRoles").unwrap().clone();
    let by_name = |b: &bson::Bson| {
        b.as_document()
            .unwrap()
            .get_str("role")
            .unwrap()
            .to_string()
    };
    held.sort_by_key(by_name);
    inherited.sort_by_key(by_name);
    assert_eq!(held, inherited);
    let privileges = u.get_array("inheritedPrivileges").unwrap();
    assert!(
        privileges.iter().any(|p| {
            let p = p.as_document().unwrap();
            p.get_document("resource").unwrap() == &doc! {"db": "app", "collection": ""}
                && p.get_array("actions")
                    .unwrap()
                    .contains(&bson::Bson::String("find".into()))
        }),
        "{privileges:?}"
    );

    // usersInfo forms.
    run(
        &app,
        doc! {"createUser": "bob", "pwd": "b-pwd", "roles": [], "mechanisms": ["SCRAM-SHA-256"]},
    )
    .await
    .unwrap();
    run(
        &rc.database("other"),
        doc! {"createUser": "alice", "pwd": "x", "roles": []},
    )
    .await
    .unwrap();
    let names = |r: bson::Document| -> Vec<String> {
        r.get_array("users")
            .unwrap()
            .iter()
            .map(|u| {
                let u = u.as_document().unwrap();
                format!(
                    "{}@{}",
                    u.get_str("user").unwrap(),
                    u.get_str("db").unwrap()
                )
            })
            .collect()
    };
    assert_eq!(
        names(run(&app, doc! {"usersInfo": 1}).await.unwrap()),
        ["alice@app", "bob@app"]
    );
    assert_eq!(
        names(
            run(&app, doc! {"usersInfo": {"forAllDBs": true}})
                .await
                .unwrap()
        ),
        ["alice@app", "alice@other", "bob@app", "root@admin"]
    );
    assert_eq!(
        names(run(&app, doc! {"usersInfo": "bob"}).await.unwrap()),
        ["bob@app"]
    );
    assert_eq!(
        names(
            run(
                &app,
                doc! {"usersInfo": [{"user": "alice", "db": "other"}, "ghost", "alice"]}
            )
            .await
            .unwrap()
        ),
        ["alice@app", "alice@other"]
    );
    assert_eq!(
        names(
            run(
                &app,
                doc! {"usersInfo": 1, "filter": {"mechanisms": {"$size": 1}}}
            )
            .await
            .unwrap()
        ),
        ["bob@app"]
    );
    let info = run(&app, doc! {"usersInfo": "alice"}).await.unwrap();
    let alice = info.get_array("users").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    let keys: Vec<&str> = alice.keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "_id",
            "userId",
            "user",
            "db",
            "customData",
            "roles",
            "mechanisms"
        ]
    );
    assert_eq!(
        alice.get_array("mechanisms").unwrap(),
        &vec![Bson::from("SCRAM-SHA-1"), Bson::from("SCRAM-SHA-256")]
    );
    let info = run(
        &app,
        doc! {"usersInfo": "alice", "showCredentials": true, "showCustomData": false},
    )
    .await
    .unwrap();
    let alice = info.get_array("users").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert!(alice.contains_key("credentials"));
    assert!(!alice.contains_key("customData"));

    // Role changes.
    run(
        &app,
        doc! {"grantRolesToUser": "bob", "roles": ["read", "dbAdmin"]},
    )
    .await
    .unwrap();
    run(
        &app,
        doc! {"revokeRolesFromUser": "bob", "roles": ["read", "userAdmin"]},
    )
    .await
    .unwrap();
    let info = run(&app, doc! {"usersInfo": "bob"}).await.unwrap();
    let bob = info.get_array("users").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(
        bob.get_array("roles").unwrap(),
        &vec![Bson::Document(doc! {"role": "dbAdmin", "db": "app"})]
    );

    // Password change: the old one stops working, the new one works.
    run(&app, doc! {"updateUser": "alice", "pwd": "new-pwd"})
        .await
        .unwrap();
    let uri = |u: &str, p: &str| {
        format!(
            "mongodb://{u}:{p}@127.0.0.1:{}/?authSource=app&serverSelectionTimeoutMS=10000",
            s.port
        )
    };
    let old = mongodb::Client::with_uri_str(uri("alice", "a-pwd"))
        .await
        .unwrap();
    assert!(
        old.database("app")
            .run_command(doc! {"ping": 1})
            .await
            .is_err()
    );
    let new = mongodb::Client::with_uri_str(uri("alice", "new-pwd"))
        .await
        .unwrap();
    new.database("app")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    // Trimming credentials to SHA-256 only.
    run(
        &app,
        doc! {"updateUser": "alice", "mechanisms": ["SCRAM-SHA-256"]},
    )
    .await
    .unwrap();
    assert_eq!(
        err(run(
            &app,
            doc! {"updateUser": "alice", "mechanisms": ["SCRAM-SHA-1"]}
        )
        .await)
        .1,
        "mechanisms field must be a subset of previously set mechanisms"
    );

    // Drops.
    run(&app, doc! {"dropUser": "bob"}).await.unwrap();
    let r = run(&app, doc! {"dropAllUsersFromDatabase": 1})
        .await
        .unwrap();
    assert_eq!(r.get("n"), Some(&Bson::Int32(1)));
    assert!(names(run(&app, doc! {"usersInfo": 1}).await.unwrap()).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_stay_out_of_the_profiler_and_logs() {
    let s = auth_server();
    let rc = root(&s).await;
    let app = rc.database("app");
    app.run_command(doc! {"profile": 2}).await.unwrap();
    app.run_command(doc! {"createUser": "carol", "pwd": "very-secret-pwd", "roles": []})
        .await
        .unwrap();
    app.run_command(doc! {"updateUser": "carol", "pwd": "another-secret-pwd"})
        .await
        .unwrap();
    let entries: Vec<bson::Document> = cairn_compat_tests::collect(
        app.collection::<bson::Document>("system.profile")
            .find(doc! {"command.pwd": {"$exists": true}})
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(entries.len(), 2, "{entries:?}");
    for e in &entries {
        assert_eq!(
            e.get_document("command").unwrap().get_str("pwd").unwrap(),
            "xxx"
        );
    }
    let all = format!(
        "{:?}",
        cairn_compat_tests::collect(
            app.collection::<bson::Document>("system.profile")
                .find(doc! {})
                .await
                .unwrap()
        )
        .await
    );
    assert!(!all.contains("secret-pwd"));
    let log = s.log().join("\n");
    assert!(!log.contains("secret-pwd"));
    assert!(!log.contains(ROOT_PWD));
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_authentication_waits_auth_failed_delay_ms() {
    let s = TestServer::start_with_env(
        &["--auth", "--setParameter", "authFailedDelayMs=300"],
        &[
            ("CAIRN_INITDB_ROOT_USERNAME", ROOT),
            ("CAIRN_INITDB_ROOT_PASSWORD", ROOT_PWD),
        ],
    );
    let mut c = s.raw().await;
    let t = Instant::now();
    let r = raw_login(&mut c, "nobody", "x", true).await;
    assert_eq!(error_of(&r[0]), failed18());
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    let ok = raw_login(&mut c, ROOT, ROOT_PWD, true).await;
    assert!(ok[1].get_bool("done").unwrap());
    let r = c
        .command(
            rawdoc! {"getParameter": 1, "authFailedDelayMs": 1, "scramIterationCount": 1,
            "scramSHA256IterationCount": 1, "$db": "admin"},
        )
        .await;
    assert_eq!(r.get_i32("authFailedDelayMs").unwrap(), 300);
    assert_eq!(r.get_i32("scramIterationCount").unwrap(), 10000);
    assert_eq!(r.get_i32("scramSHA256IterationCount").unwrap(), 15000);
    let r = c
        .command(rawdoc! {"setParameter": 1, "scramIterationCount": 4999, "$db": "admin"})
        .await;
    assert_eq!(r.get_i32("code").unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn init_root_variables() {
    // Only one of the pair: the server refuses to start, as the official image.
    for (var, other) in [
        ("CAIRN_INITDB_ROOT_USERNAME", "CAIRN_INITDB_ROOT_PASSWORD"),
        ("MONGO_INITDB_ROOT_PASSWORD", "MONGO_INITDB_ROOT_USERNAME"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(cairn_bin())
            .args(["--port", "0", "--data-dir"])
            .arg(dir.path())
            .env(var, "x")
            .env_remove(other)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("error: missing '"), "{err}");
        assert!(err.contains(other) || err.contains(var), "{err}");
    }
    // The official image's names work too, and turn --auth on by themselves.
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("MONGO_INITDB_ROOT_USERNAME", "admin1"),
        ("MONGO_INITDB_ROOT_PASSWORD", "pw1"),
    ];
    {
        let s = TestServer::start_in_env(dir.path(), &[], &env);
        let mut raw = s.raw().await;
        let r = raw.command(rawdoc! {"find": "c", "$db": "app"}).await;
        assert_eq!(r.get_i32("code").unwrap(), 13);
        login(&s, "admin1", "pw1", "")
            .await
            .database("admin")
            .run_command(doc! {"ping": 1})
            .await
            .unwrap();
    }
    // A restart with other values leaves the existing users alone.
    let s = TestServer::start_in_env(
        dir.path(),
        &[],
        &[
            ("MONGO_INITDB_ROOT_USERNAME", "admin2"),
            ("MONGO_INITDB_ROOT_PASSWORD", "pw2"),
        ],
    );
    let c = login(&s, "admin1", "pw1", "").await;
    let info = c
        .database("admin")
        .run_command(doc! {"usersInfo": {"forAllDBs": true}})
        .await
        .unwrap();
    assert_eq!(info.get_array("users").unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn unauthenticated_connections_get_a_small_message_limit() {
    let s = auth_server();
    let big =
        rawdoc! {"insert": "c", "documents": [{"s": "x".repeat(2 * 1024 * 1024)}], "$db": "app"};
    // Before authenticating: a 2 MB message closes the connection.
    let mut c = s.raw().await;
    let m = cairn_wire::op_msg::encode(c.next_id(), 0, 0, &big, false);
    // The server closes as soon as it has read the header, so the write itself may fail.
    if c.send_until_closed(&m).await {
        assert!(c.recv().await.is_none(), "the connection stays open");
    }
    // A small refused command is answered.
    let mut c = s.raw().await;
    let r = c.command(rawdoc! {"find": "c", "$db": "app"}).await;
    assert_eq!(r.get_i32("code").unwrap(), 13);
    // After authenticating, the usual limit applies.
    raw_login(&mut c, ROOT, ROOT_PWD, true).await;
    let r = c.command(big).await;
    assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{r:?}");
    assert_eq!(r.get_i32("n").unwrap(), 1);
}
