//! TLS through the official driver (rustls): every `--tls-mode`, client certificates against
//! the CA file, certificate rotation (`rotateCertificates`, SIGHUP), startup errors, and raw
//! bytes that are neither a MongoDB message nor a TLS ClientHello.
//!
//! rcgen makes a throwaway PKI per test: a CA, a server certificate for `localhost` and
//! `127.0.0.1`, and a client certificate with a chosen subject, as PEM files.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bson::{Document, doc};
use cairn_compat_tests::{RawConn, TestServer, cairn_bin, code_of};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One certificate authority and the files it issued, in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    /// A CA named `name`, with `ca.pem`, `server.pem` (chain + key) and `client.pem`
    /// (certificate + key, subject `CN=client,OU=tests,O=Cairn`).
    fn new(name: &str) -> Pki {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("CA");
        std::fs::write(dir.path().join("ca.pem"), cert.pem()).expect("write");
        let pki = Pki {
            dir,
            issuer: Issuer::new(params, key),
        };
        pki.issue("server.pem", "server", true);
        pki.issue("client.pem", "client", false);
        pki
    }

    /// Issues a server (SAN localhost, 127.0.0.1) or client certificate into `file`.
    fn issue(&self, file: &str, cn: &str, server: bool) {
        let key = KeyPair::generate().expect("key");
        let sans = if server {
            vec!["localhost".to_string(), "127.0.0.1".to_string()]
        } else {
            Vec::new()
        };
        let mut params = CertificateParams::new(sans).expect("params");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Cairn");
        params
            .distinguished_name
            .push(DnType::OrganizationalUnitName, "tests");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        std::fs::write(
            self.dir.path().join(file),
            format!("{}{}", cert.pem(), key.serialize_pem()),
        )
        .expect("write");
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    fn s(&self, file: &str) -> String {
        self.path(file).display().to_string()
    }
}

/// Server flags for `mode` with this PKI's server certificate and CA.
fn tls_args(pki: &Pki, mode: &str, extra: &[&str]) -> Vec<String> {
    let mut a = vec![
        "--tls-mode".to_string(),
        mode.into(),
        "--tls-certificate-key-file".into(),
        pki.s("server.pem"),
        "--tls-ca-file".into(),
        pki.s("ca.pem"),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn start(args: &[String]) -> TestServer {
    TestServer::start_with(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// A client on `port` with URI options `opts`, selecting the server within 3 s.
async fn client(port: u16, opts: &str) -> mongodb::Client {
    let uri = if opts.is_empty() {
        format!("mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=3000")
    } else {
        format!("mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=3000&{opts}")
    };
    mongodb::Client::with_uri_str(uri).await.expect("client")
}

/// TLS URI options trusting `ca`, with an optional client certificate.
fn tls_opts(ca: &Path, cert: Option<&Path>) -> String {
    let mut o = format!("tls=true&tlsCAFile={}", ca.display());
    if let Some(c) = cert {
        o.push_str(&format!("&tlsCertificateKeyFile={}", c.display()));
    }
    o
}

async fn ping(c: &mongodb::Client) -> mongodb::error::Result<Document> {
    c.database("admin").run_command(doc! {"ping": 1}).await
}

/// Inserts and reads back a document: the connection carries real traffic.
async fn round_trip(c: &mongodb::Client, tag: &str) {
    let coll = c.database("tls").collection::<Document>("t");
    coll.insert_one(doc! {"_id": tag, "big": "x".repeat(100_000)})
        .await
        .expect("insert");
    let back = coll
        .find_one(doc! {"_id": tag})
        .await
        .expect("find")
        .expect("found");
    assert_eq!(back.get_str("big").unwrap().len(), 100_000);
}

async fn transport_security(c: &mongodb::Client) -> Document {
    let s = c
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await
        .expect("serverStatus");
    s.get_document("transportSecurity").unwrap().clone()
}

/// True when the server closes a plain connection that sent a `hello`.
async fn plain_hello_is_closed(port: u16) -> bool {
    let mut raw = RawConn::connect(port).await;
    let hello = bson::rawdoc! {"hello": 1, "$db": "admin"};
    raw.send_command(&hello, 0).await;
    raw.is_closed_within(Duration::from_secs(5)).await
}

#[tokio::test]
async fn require_tls_serves_tls_clients_with_certificates_and_refuses_plain_ones() {
    let pki = Pki::new("Cairn Test CA");
    let s = start(&tls_args(&pki, "requireTLS", &[]));
    let c = client(
        s.port,
        &tls_opts(&pki.path("ca.pem"), Some(&pki.path("client.pem"))),
    )
    .await;
    ping(&c).await.expect("TLS client with a certificate");
    round_trip(&c, "require").await;
    let ts = transport_security(&c).await;
    assert!(ts.get_i64("1.3").unwrap() >= 1, "{ts:?}");
    assert_eq!(ts.get_i64("1.0").unwrap(), 0);
    let keys: Vec<&str> = ts.keys().map(String::as_str).collect();
    assert_eq!(keys, ["1.0", "1.1", "1.2", "1.3", "unknown"]);

    // No client certificate while the CA file makes one mandatory.
    let no_cert = client(s.port, &tls_opts(&pki.path("ca.pem"), None)).await;
    assert!(ping(&no_cert).await.is_err());
    // A client certificate from another CA.
    let other = Pki::new("Other CA");
    let foreign = client(
        s.port,
        &tls_opts(&pki.path("ca.pem"), Some(&other.path("client.pem"))),
    )
    .await;
    assert!(ping(&foreign).await.is_err());
    // Plain clients are refused.
    let plain = client(s.port, "").await;
    assert!(ping(&plain).await.is_err());
    assert!(plain_hello_is_closed(s.port).await);
    // The TLS client is unaffected.
    ping(&c).await.expect("still serving");
    s.log_with("The server is configured to only allow SSL connections")
        .await;
}

#[tokio::test]
async fn wrong_ca_on_the_client_fails() {
    let pki = Pki::new("Cairn Test CA");
    let other = Pki::new("Other CA");
    let s = start(&tls_args(
        &pki,
        "requireTLS",
        &["--tls-allow-connections-without-certificates"],
    ));
    let c = client(s.port, &tls_opts(&other.path("ca.pem"), None)).await;
    assert!(ping(&c).await.is_err());
    let ok = client(s.port, &tls_opts(&pki.path("ca.pem"), None)).await;
    ping(&ok).await.expect("right CA");
}

#[tokio::test]
async fn allow_connections_without_certificates_still_checks_presented_ones() {
    let pki = Pki::new("Cairn Test CA");
    let other = Pki::new("Other CA");
    let s = start(&tls_args(
        &pki,
        "requireTLS",
        &["--tls-allow-connections-without-certificates"],
    ));
    let anon = client(s.port, &tls_opts(&pki.path("ca.pem"), None)).await;
    ping(&anon).await.expect("no certificate is allowed");
    round_trip(&anon, "anon").await;
    let foreign = client(
        s.port,
        &tls_opts(&pki.path("ca.pem"), Some(&other.path("client.pem"))),
    )
    .await;
    assert!(
        ping(&foreign).await.is_err(),
        "a presented certificate must verify"
    );
}

#[tokio::test]
async fn allow_invalid_certificates_accepts_a_foreign_client_certificate() {
    let pki = Pki::new("Cairn Test CA");
    let other = Pki::new("Other CA");
    let s = start(&tls_args(
        &pki,
        "requireTLS",
        &["--tls-allow-invalid-certificates"],
    ));
    let foreign = client(
        s.port,
        &tls_opts(&pki.path("ca.pem"), Some(&other.path("client.pem"))),
    )
    .await;
    ping(&foreign).await.expect("invalid certificate allowed");
}

#[tokio::test]
async fn allow_and_prefer_tls_accept_plain_and_tls_clients_on_one_port() {
    let pki = Pki::new("Cairn Test CA");
    for mode in ["allowTLS", "preferTLS"] {
        let s = start(&tls_args(
            &pki,
            mode,
            &["--tls-allow-connections-without-certificates"],
        ));
        let tls = client(s.port, &tls_opts(&pki.path("ca.pem"), None)).await;
        let plain = client(s.port, "").await;
        round_trip(&tls, &format!("{mode}-tls")).await;
        round_trip(&plain, &format!("{mode}-plain")).await;
        let n = plain
            .database("tls")
            .collection::<Document>("t")
            .count_documents(doc! {})
            .await
            .unwrap();
        assert_eq!(n, 2, "{mode}");
        let ts = transport_security(&plain).await;
        assert!(ts.get_i64("1.3").unwrap() >= 1, "{mode}: {ts:?}");
        let mut raw = RawConn::connect(s.port).await;
        assert!(raw.ping_ok().await, "{mode}: a raw plain connection works");
    }
}

#[tokio::test]
async fn tls_1_3_can_be_disabled() {
    let pki = Pki::new("Cairn Test CA");
    let s = start(&tls_args(
        &pki,
        "requireTLS",
        &[
            "--tls-allow-connections-without-certificates",
            "--tls-disabled-protocols",
            "TLS1_0,TLS1_1,TLS1_3",
        ],
    ));
    let c = client(s.port, &tls_opts(&pki.path("ca.pem"), None)).await;
    ping(&c).await.expect("TLS 1.2");
    let ts = transport_security(&c).await;
    assert!(ts.get_i64("1.2").unwrap() >= 1, "{ts:?}");
    assert_eq!(ts.get_i64("1.3").unwrap(), 0, "{ts:?}");
}

#[tokio::test]
async fn rotate_certificates_switches_new_connections_and_keeps_old_ones() {
    let first = Pki::new("First CA");
    let second = Pki::new("Second CA");
    // The server's files live in their own directory so the test can rewrite them.
    let files = tempfile::tempdir().unwrap();
    let key_file = files.path().join("server.pem");
    let ca_file = files.path().join("ca.pem");
    std::fs::copy(first.path("server.pem"), &key_file).unwrap();
    std::fs::copy(first.path("ca.pem"), &ca_file).unwrap();
    let s = TestServer::start_with(&[
        "--tls-mode",
        "requireTLS",
        "--tls-certificate-key-file",
        key_file.to_str().unwrap(),
        "--tls-ca-file",
        ca_file.to_str().unwrap(),
        "--tls-allow-connections-without-certificates",
    ]);
    let old = client(s.port, &tls_opts(&first.path("ca.pem"), None)).await;
    ping(&old).await.expect("first certificate");

    std::fs::copy(second.path("server.pem"), &key_file).unwrap();
    std::fs::copy(second.path("ca.pem"), &ca_file).unwrap();
    let r = old
        .database("admin")
        .run_command(doc! {"rotateCertificates": 1, "message": "test rotation"})
        .await
        .expect("rotateCertificates");
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    let log = s
        .log_with("Certificate rotation completed successfully")
        .await;
    assert!(log.contains("test rotation"), "{log}");

    let new = client(s.port, &tls_opts(&second.path("ca.pem"), None)).await;
    ping(&new)
        .await
        .expect("new connections use the new certificate");
    let stale = client(s.port, &tls_opts(&first.path("ca.pem"), None)).await;
    assert!(ping(&stale).await.is_err(), "the old certificate is gone");
    ping(&old)
        .await
        .expect("an existing connection keeps working");

    // The new CA file verifies client certificates too.
    let client_cert = client(
        s.port,
        &tls_opts(&second.path("ca.pem"), Some(&second.path("client.pem"))),
    )
    .await;
    ping(&client_cert)
        .await
        .expect("client certificate of the new CA");

    // A failed rotation reports InvalidSSLConfiguration and keeps the current certificate.
    std::fs::write(&key_file, "not a certificate").unwrap();
    let e = old
        .database("admin")
        .run_command(doc! {"rotateCertificates": 1})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 140, "{e}");
    let again = client(s.port, &tls_opts(&second.path("ca.pem"), None)).await;
    ping(&again).await.expect("the old configuration stays");

    // Bad arguments and the admin-only rule.
    let e = old
        .database("admin")
        .run_command(doc! {"rotateCertificates": 1, "message": 5})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 14, "{e}");
    let e = old
        .database("test")
        .run_command(doc! {"rotateCertificates": 1})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 13, "{e}");

    // SIGHUP re-reads the files as well.
    std::fs::copy(first.path("server.pem"), &key_file).unwrap();
    std::fs::copy(first.path("ca.pem"), &ca_file).unwrap();
    s.signal("HUP");
    let mut rotated = false;
    for _ in 0..50 {
        let c = client(s.port, &tls_opts(&first.path("ca.pem"), None)).await;
        if ping(&c).await.is_ok() {
            rotated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rotated, "SIGHUP rotated back to the first certificate");
}

#[tokio::test]
async fn rotate_certificates_without_tls_succeeds() {
    let s = TestServer::start();
    let c = s.client().await;
    let r = c
        .database("admin")
        .run_command(doc! {"rotateCertificates": 1})
        .await
        .expect("nothing to rotate");
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    let ts = transport_security(&c).await;
    assert_eq!(ts.get_i64("1.3").unwrap(), 0);
}

#[tokio::test]
async fn garbage_and_stalled_handshakes_never_hurt_the_server() {
    let pki = Pki::new("Cairn Test CA");
    for mode in ["requireTLS", "allowTLS"] {
        let s = start(&tls_args(
            &pki,
            mode,
            &["--tls-allow-connections-without-certificates"],
        ));
        // A connection that sends nothing must not hold up others.
        let _stalled = tokio::net::TcpStream::connect(("127.0.0.1", s.port))
            .await
            .unwrap();
        // A header whose responseTo is neither 0 nor -1 goes to the TLS handshake, which
        // rejects it; so does a fake TLS record.
        let mut header = vec![0u8; 64];
        header[..4].copy_from_slice(&64i32.to_le_bytes());
        header[8..12].copy_from_slice(&0x1234_5678i32.to_le_bytes());
        let mut fake_tls = vec![0x16, 0x03, 0x01, 0x00, 0x20];
        fake_tls.extend([0xAB; 32]);
        for bytes in [header, fake_tls, b"GET / HTTP/1.1\r\n\r\n\x00\x00".to_vec()] {
            let mut t = tokio::net::TcpStream::connect(("127.0.0.1", s.port))
                .await
                .unwrap();
            t.write_all(&bytes).await.unwrap();
            let mut buf = vec![0u8; 4096];
            let closed = tokio::time::timeout(Duration::from_secs(5), async {
                loop {
                    match t.read(&mut buf).await {
                        Ok(0) | Err(_) => return true,
                        Ok(_) => {}
                    }
                }
            })
            .await;
            assert_eq!(closed, Ok(true), "{mode}: {bytes:?}");
        }
        let c = client(s.port, &tls_opts(&pki.path("ca.pem"), None)).await;
        ping(&c).await.expect("the server still serves TLS clients");
    }
}

#[tokio::test]
async fn get_cmd_line_opts_shows_the_tls_options() {
    let pki = Pki::new("Cairn Test CA");
    let s = start(&tls_args(
        &pki,
        "preferTLS",
        &["--tls-allow-connections-without-certificates"],
    ));
    let c = client(s.port, "").await;
    let r = c
        .database("admin")
        .run_command(doc! {"getCmdLineOpts": 1})
        .await
        .unwrap();
    let tls = r
        .get_document("parsed")
        .unwrap()
        .get_document("net")
        .unwrap()
        .get_document("tls")
        .unwrap();
    assert_eq!(
        tls,
        &doc! {
            "mode": "preferTLS",
            "certificateKeyFile": pki.s("server.pem"),
            "CAFile": pki.s("ca.pem"),
            "allowConnectionsWithoutCertificates": true,
        }
    );
}

#[tokio::test]
async fn encrypted_key_with_its_password() {
    let pki = Pki::new("Cairn Test CA");
    // Split server.pem into certificate and key, and encrypt the key as operators do.
    let pem = std::fs::read_to_string(pki.path("server.pem")).unwrap();
    let at = pem.find("-----BEGIN PRIVATE KEY-----").expect("key");
    std::fs::write(pki.path("key.pem"), &pem[at..]).unwrap();
    let out = Command::new("openssl")
        .args([
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-passout",
            "pass:pw",
        ])
        .arg("-in")
        .arg(pki.path("key.pem"))
        .output()
        .expect("openssl");
    assert!(out.status.success());
    let encrypted = format!("{}{}", &pem[..at], String::from_utf8(out.stdout).unwrap());
    std::fs::write(pki.path("server-enc.pem"), encrypted).unwrap();
    let s = TestServer::start_with(&[
        "--tls-mode",
        "requireTLS",
        "--tls-certificate-key-file",
        &pki.s("server-enc.pem"),
        "--tls-certificate-key-file-password",
        "pw",
        "--tls-ca-file",
        &pki.s("ca.pem"),
        "--tls-allow-connections-without-certificates",
    ]);
    let c = client(s.port, &tls_opts(&pki.path("ca.pem"), None)).await;
    ping(&c).await.expect("decrypted key");
    let r = c
        .database("admin")
        .run_command(doc! {"getCmdLineOpts": 1})
        .await
        .unwrap();
    let text = format!("{r:?}");
    assert!(!text.contains("\"pw\""), "the password is redacted: {text}");
    assert!(text.contains("<password>"), "{text}");

    let (code, log) = run_to_exit(&[
        "--tls-mode",
        "requireTLS",
        "--tls-certificate-key-file",
        &pki.s("server-enc.pem"),
        "--tls-certificate-key-file-password",
        "wrong",
        "--tls-ca-file",
        &pki.s("ca.pem"),
    ]);
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("cannot decrypt the private key"), "{log}");
}

/// Runs the server with `args` until it exits (it must fail to start); returns the exit code
/// and everything it printed.
fn run_to_exit(args: &[&str]) -> (i32, String) {
    run_to_exit_with_env(args, &[])
}

/// [`run_to_exit`] with extra environment variables.
fn run_to_exit_with_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(cairn_bin())
        .args(["--port", "0", "--data-dir"])
        .arg(dir.path())
        .args(args)
        .envs(env.iter().copied())
        .env_remove("CAIRN_PORT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return (status.code().unwrap_or(-1), text);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server started with {args:?} but should have refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn startup_refuses_bad_tls_configuration() {
    let pki = Pki::new("Cairn Test CA");
    let (server, ca) = (pki.s("server.pem"), pki.s("ca.pem"));
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--tls-mode", "requireTLS"],
            2,
            "need tlsCertificateKeyFile",
        ),
        (
            &[
                "--tls-mode",
                "requireTLS",
                "--tls-certificate-key-file",
                &server,
            ],
            2,
            "without specifying a chain of trust",
        ),
        (
            &["--tls-ca-file", &ca],
            2,
            "need to enable TLS via the tlsMode flag",
        ),
        (
            &[
                "--tls-mode",
                "requireTLS",
                "--tls-certificate-key-file",
                "/nonexistent/server.pem",
                "--tls-ca-file",
                &ca,
            ],
            1,
            "cannot read the certificate key file /nonexistent/server.pem",
        ),
        (
            &[
                "--tls-mode",
                "requireTLS",
                "--tls-certificate-key-file",
                &ca,
                "--tls-ca-file",
                &ca,
            ],
            1,
            "holds no private key",
        ),
        (
            &[
                "--tls-mode",
                "allowTLS",
                "--tls-certificate-key-file",
                &server,
                "--tls-ca-file",
                "/nonexistent/ca.pem",
            ],
            1,
            "cannot read the CA file",
        ),
    ];
    for (args, code, message) in cases {
        let (got, log) = run_to_exit(args);
        assert_eq!(got, *code, "{args:?}: {log}");
        assert!(log.contains(message), "{args:?}: {log}");
    }
    // The same options from CAIRN_TLS_* variables.
    let (got, log) = run_to_exit_with_env(
        &[],
        &[
            ("CAIRN_TLS_MODE", "requireTLS"),
            ("CAIRN_TLS_CERTIFICATE_KEY_FILE", &ca),
            ("CAIRN_TLS_CA_FILE", &ca),
        ],
    );
    assert_eq!(got, 1, "{log}");
    assert!(log.contains("holds no private key"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn x509_authenticates_the_certificate_subject() {
    let pki = Pki::new("X509 CA");
    let mut args = tls_args(&pki, "requireTLS", &[]);
    args.push("--auth".into());
    let s = TestServer::start_with_env(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[
            ("CAIRN_INITDB_ROOT_USERNAME", "root"),
            ("CAIRN_INITDB_ROOT_PASSWORD", "pw"),
        ],
    );
    let cert_opts = tls_opts(&pki.path("ca.pem"), Some(&pki.path("client.pem")));
    let root = mongodb::Client::with_uri_str(format!(
        "mongodb://root:pw@127.0.0.1:{}/?authSource=admin&serverSelectionTimeoutMS=3000&{cert_opts}",
        s.port
    ))
    .await
    .unwrap();
    // The user name is the certificate's subject as openssl prints it in RFC 2253 form.
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in"])
        .arg(pki.path("client.pem"))
        .output()
        .expect("openssl");
    let printed = String::from_utf8(out.stdout).unwrap();
    let subject = printed.trim().trim_start_matches("subject=").to_string();
    let subject = subject.as_str();
    root.database("$external")
        .run_command(doc! {"createUser": subject, "roles": [{"role": "read", "db": "test"}]})
        .await
        .unwrap();
    root.database("test")
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();

    // The driver's MONGODB-X509: the subject is the user, with its roles.
    let x509 = client(s.port, &format!("{cert_opts}&authMechanism=MONGODB-X509")).await;
    let c = x509.database("test").collection::<Document>("c");
    assert_eq!(c.find_one(doc! {}).await.unwrap(), Some(doc! {"_id": 1}));
    assert_eq!(
        code_of(&c.insert_one(doc! {"_id": 2}).await.unwrap_err()),
        13
    );
    let status = x509
        .database("admin")
        .run_command(doc! {"connectionStatus": 1})
        .await
        .unwrap();
    assert_eq!(
        status
            .get_document("authInfo")
            .unwrap()
            .get_array("authenticatedUsers")
            .unwrap()[0],
        bson::Bson::Document(doc! {"user": subject, "db": "$external"})
    );

    // The command itself: the reply, a wrong user (18), the wrong database (17).
    let anon = client(s.port, &cert_opts).await;
    let ext = anon.database("$external");
    let e = ext
        .run_command(doc! {"authenticate": 1, "mechanism": "MONGODB-X509", "user": "CN=other"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 18);
    let e = anon
        .database("test")
        .run_command(doc! {"authenticate": 1, "mechanism": "MONGODB-X509"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 17);
    let r = ext
        .run_command(doc! {"authenticate": 1, "mechanism": "MONGODB-X509"})
        .await
        .unwrap();
    assert_eq!(r.get_str("user").unwrap(), subject);
    assert_eq!(r.get_str("dbname").unwrap(), "$external");
}
