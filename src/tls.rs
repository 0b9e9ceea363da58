//! TLS with rustls: the server configuration, the plain-or-TLS stream, certificate rotation.
//!
//! Map:
//! - [`TlsMode`] is mongod's `net.tls.mode`: `disabled` (plain only), `allowTLS` and
//!   `preferTLS` (plain and TLS on one port; a standalone server makes no outgoing
//!   connections, so the two behave the same here), `requireTLS` (TLS only).
//! - [`check_options`] validates the option combination at parse time (mongod's option
//!   errors, exit code 2); [`Tls::load`] reads the files at startup (a failure stops the
//!   server, exit code 1) and [`Tls::rotate`] re-reads them for `rotateCertificates` and
//!   SIGHUP.
//! - [`Tls::establish`] turns an accepted socket into a [`Stream`]: it peeks at the first
//!   16 bytes, as mongod does, and treats them as a MongoDB message header when its
//!   `responseTo` is 0 or -1 (a plain client's first message); anything else goes to the TLS
//!   handshake (a ClientHello always has the protocol version bytes `03 0x` there). The peek
//!   and the handshake together are bounded by [`HANDSHAKE_TIMEOUT`] and run in the
//!   connection's own task, so a stalled client never holds up the accept loop.
//! - [`Stream`] is an enum, not a trait object: each read or write is one `match`, and the
//!   plain variant is the bare `TcpStream`.
//!
//! Client certificates: mongod (since 7.0.6) refuses TLS without a chain of trust, so a CA
//! file is required whenever TLS is on; with it, clients must present a certificate that
//! verifies against it, unless `--tls-allow-connections-without-certificates` (a certificate
//! that *is* presented must still verify) or `--tls-allow-invalid-certificates` (an invalid
//! one is accepted with a warning). [`PeerInfo::subject`] is the RFC 2253 subject of a
//! verified client certificate, for MONGODB-X509 authentication.
//!
//! Invariants: the configuration in use is swapped whole (an `Arc` behind a briefly held
//! lock), so a connection handshakes with either the old or the new certificate, never a
//! mix; a rotation that fails leaves the old configuration in place; one rotation runs at a
//! time; files are size-checked before they are read.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use clap::ValueEnum;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tracing::{info, warn};

use crate::config::Config;

/// How long a new connection may take to send its first bytes and finish the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest certificate, key or CA file read.
pub const MAX_PEM_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// mongod's `net.tls.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TlsMode {
    /// No TLS.
    #[value(name = "disabled")]
    Disabled,
    /// Plain and TLS clients on the same port.
    #[value(name = "allowTLS")]
    AllowTls,
    /// Plain and TLS clients on the same port (outgoing connections would use TLS).
    #[value(name = "preferTLS")]
    PreferTls,
    /// TLS clients only.
    #[value(name = "requireTLS")]
    RequireTls,
}

impl TlsMode {
    /// The name mongod uses.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::AllowTls => "allowTLS",
            TlsMode::PreferTls => "preferTLS",
            TlsMode::RequireTls => "requireTLS",
        }
    }
}

/// The TLS protocol versions rustls speaks.
const PROTOCOLS: &[&str] = &["TLS1_0", "TLS1_1", "TLS1_2", "TLS1_3"];

/// Checks the TLS options together, as mongod does when it stores its options: a mode other
/// than `disabled` needs a certificate key file and a CA file, TLS options need a mode, and
/// `--tls-disabled-protocols` names known protocols and leaves one enabled.
pub fn check_options(c: &Config) -> Result<(), String> {
    let other_options = c.tls_certificate_key_file.is_some()
        || c.tls_certificate_key_file_password.is_some()
        || c.tls_ca_file.is_some()
        || c.tls_allow_connections_without_certificates
        || c.tls_allow_invalid_certificates
        || !c.tls_disabled_protocols.is_empty();
    if c.tls_mode == TlsMode::Disabled {
        if other_options {
            return Err(
                "need to enable TLS via the tlsMode flag (--tls-mode) when using TLS configuration parameters"
                    .into(),
            );
        }
        return Ok(());
    }
    if c.tls_certificate_key_file.is_none() {
        return Err(
            "need tlsCertificateKeyFile (--tls-certificate-key-file) when TLS is enabled".into(),
        );
    }
    if c.tls_ca_file.is_none() {
        return Err(
            "The use of TLS without specifying a chain of trust is no longer supported: \
                    give a CA file with --tls-ca-file (net.tls.CAFile)"
                .into(),
        );
    }
    protocol_versions(&c.tls_disabled_protocols).map(|_| ())
}

/// The rustls protocol versions left after `--tls-disabled-protocols`.
fn protocol_versions(
    disabled: &[String],
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let mut off = Vec::new();
    for p in disabled {
        let p = p.trim();
        match p {
            "none" | "" => {}
            _ if PROTOCOLS.contains(&p) => off.push(p),
            other => {
                return Err(format!(
                    "Unrecognized tlsDisabledProtocols '{other}' (expected TLS1_0, TLS1_1, TLS1_2, TLS1_3 or none)"
                ));
            }
        }
    }
    let mut versions = Vec::new();
    if !off.contains(&"TLS1_3") {
        versions.push(&rustls::version::TLS13);
    }
    if !off.contains(&"TLS1_2") {
        versions.push(&rustls::version::TLS12);
    }
    if versions.is_empty() {
        return Err(
            "tlsDisabledProtocols leaves no protocol: TLS 1.2 or 1.3 must stay enabled".into(),
        );
    }
    Ok(versions)
}

/// What a TLS connection learned about its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    /// The negotiated protocol, as `serverStatus.transportSecurity` names it ("1.2", "1.3").
    pub version: &'static str,
    /// The subject of the client certificate in RFC 2253 form, when one was presented and
    /// verified against the CA file.
    pub subject: Option<String>,
}

/// `serverStatus.transportSecurity`: TLS connections accepted, by protocol version.
#[derive(Debug, Default)]
pub struct VersionCounters {
    /// TLS 1.2 connections.
    pub tls12: AtomicI64,
    /// TLS 1.3 connections.
    pub tls13: AtomicI64,
    /// Connections with a version Cairn does not name.
    pub unknown: AtomicI64,
}

/// One loaded configuration: what a handshake uses.
#[derive(Debug)]
struct Loaded {
    config: Arc<ServerConfig>,
    /// The verifier that decides whether a client certificate is *valid* (with
    /// `--tls-allow-invalid-certificates` the handshake accepts invalid ones too, but only a
    /// valid one yields a subject).
    strict: Arc<dyn ClientCertVerifier>,
}

/// The files and verification settings a configuration is built from.
#[derive(Debug)]
struct Settings {
    key_file: PathBuf,
    key_password: Option<String>,
    ca_file: PathBuf,
    allow_without_certificates: bool,
    allow_invalid_certificates: bool,
    versions: Vec<&'static rustls::SupportedProtocolVersion>,
}

/// The server's TLS state.
#[derive(Debug)]
pub struct Tls {
    /// The mode.
    pub mode: TlsMode,
    settings: Settings,
    current: RwLock<Arc<Loaded>>,
    rotating: Mutex<()>,
    /// Accepted TLS connections by version.
    pub counters: VersionCounters,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_pem_file(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    let err = |e: io::Error| format!("cannot read the {what} {}: {e}", path.display());
    let len = std::fs::metadata(path).map_err(err)?.len();
    if len > MAX_PEM_FILE_BYTES {
        return Err(format!(
            "the {what} {} is larger than {MAX_PEM_FILE_BYTES} bytes",
            path.display()
        ));
    }
    std::fs::read(path).map_err(err)
}

fn certificates(
    pem: &[u8],
    path: &Path,
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot parse the {what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "the {what} {} holds no certificate (expected PEM \"BEGIN CERTIFICATE\" sections)",
            path.display()
        ));
    }
    Ok(certs)
}

fn private_key(pem: &[u8], path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    match PrivateKeyDer::from_pem_slice(pem) {
        Ok(k) => Ok(k),
        Err(rustls::pki_types::pem::Error::NoItemsFound) => {
            if find_section(pem, ENCRYPTED_KEY_LABEL).is_some() {
                Err(format!(
                    "the private key in {} is encrypted: give its password with \
                     --tls-certificate-key-file-password (net.tls.certificateKeyFilePassword)",
                    path.display()
                ))
            } else {
                Err(format!(
                    "the certificate key file {} holds no private key (expected a PEM \
                     \"PRIVATE KEY\", \"RSA PRIVATE KEY\", \"EC PRIVATE KEY\" or \"ENCRYPTED \
                     PRIVATE KEY\" section beside the certificates)",
                    path.display()
                ))
            }
        }
        Err(e) => Err(format!(
            "cannot parse the private key in {}: {e}",
            path.display()
        )),
    }
}

/// The PEM label of an encrypted PKCS#8 key (what `openssl pkcs8 -topk8` writes).
const ENCRYPTED_KEY_LABEL: &str = "ENCRYPTED PRIVATE KEY";

/// The bytes of the first PEM section labelled `label`, armour included.
fn find_section<'a>(pem: &'a [u8], label: &str) -> Option<&'a [u8]> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = pem
        .windows(begin.len())
        .position(|w| w == begin.as_bytes())?;
    let stop = pem[start..]
        .windows(end.len())
        .position(|w| w == end.as_bytes())?;
    Some(&pem[start..start + stop + end.len()])
}

/// Decrypts the PKCS#8 `ENCRYPTED PRIVATE KEY` (PBES2: PBKDF2 or scrypt with AES) in `pem`.
/// The legacy OpenSSL format (`Proc-Type: 4,ENCRYPTED` in an `RSA PRIVATE KEY`) is refused
/// with a hint to convert it.
fn decrypt_private_key(
    pem: &[u8],
    password: &str,
    path: &Path,
) -> Result<PrivateKeyDer<'static>, String> {
    let Some(section) = find_section(pem, ENCRYPTED_KEY_LABEL) else {
        let legacy = String::from_utf8_lossy(pem).contains("Proc-Type: 4,ENCRYPTED");
        return Err(if legacy {
            format!(
                "the private key in {} is encrypted in the legacy OpenSSL format, which is not \
                 supported: convert it to PKCS#8 (`openssl pkcs8 -topk8 -v2 aes-256-cbc`)",
                path.display()
            )
        } else {
            format!(
                "a password was given but {} holds no \"{ENCRYPTED_KEY_LABEL}\" section",
                path.display()
            )
        });
    };
    let (_, der) = pkcs8::der::pem::decode_vec(section).map_err(|e| {
        format!(
            "cannot parse the encrypted private key in {}: {e}",
            path.display()
        )
    })?;
    let info =
        pkcs8::EncryptedPrivateKeyInfo::<pkcs8::der::asn1::OctetString>::try_from(der.as_slice())
            .map_err(|e| {
            format!(
                "cannot parse the encrypted private key in {}: {e}",
                path.display()
            )
        })?;
    let key = info.decrypt(password.as_bytes()).map_err(|e| {
        format!(
            "cannot decrypt the private key in {} (wrong password?): {e}",
            path.display()
        )
    })?;
    Ok(PrivateKeyDer::Pkcs8(key.as_bytes().to_vec().into()))
}

/// Accepts a client certificate that fails verification, with a warning (mongod's
/// `allowInvalidCertificates`); signatures are still checked.
#[derive(Debug)]
struct AllowInvalid(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for AllowInvalid {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.0.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if let Err(e) = self.0.verify_client_cert(end_entity, intermediates, now) {
            warn!(error = %format!("SSL peer certificate validation failed: {e}"),
                  "accepting an invalid client certificate (tlsAllowInvalidCertificates)");
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The RFC 2253 subject of a DER certificate.
pub fn subject_of(der: &[u8]) -> Option<String> {
    use x509_cert::der::Decode;
    let cert = x509_cert::Certificate::from_der(der).ok()?;
    Some(cert.tbs_certificate().subject().to_string())
}

/// Where the first bytes of a connection say it goes.
enum Sniffed {
    Plain,
    Tls,
    /// The client left before sending anything.
    Closed,
}

/// Peeks at the first 16 bytes: a MongoDB header whose `responseTo` is 0 or -1 is a plain
/// client; anything else is handed to the TLS handshake (mongod's rule).
async fn sniff(tcp: &TcpStream) -> io::Result<Sniffed> {
    let mut head = [0u8; 16];
    loop {
        let n = tcp.peek(&mut head).await?;
        if n == 0 {
            return Ok(Sniffed::Closed);
        }
        // A TLS record starts with the handshake type and a 3.x version: no need to wait for
        // more (a ClientHello is always longer than 16 bytes anyway).
        if n >= 3 && head[0] == 0x16 && head[1] == 0x03 {
            return Ok(Sniffed::Tls);
        }
        if n == head.len() {
            let response_to = i32::from_le_bytes([head[8], head[9], head[10], head[11]]);
            return Ok(if response_to == 0 || response_to == -1 {
                Sniffed::Plain
            } else {
                Sniffed::Tls
            });
        }
        // Fewer bytes than a header so far: wait for the rest (bounded by the caller's
        // timeout; a peek that sees the same bytes again would spin).
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

impl Settings {
    /// Builds a configuration from the files as they are now.
    fn read_files(&self) -> Result<Loaded, String> {
        let pem = read_pem_file(&self.key_file, "certificate key file")?;
        let chain = certificates(&pem, &self.key_file, "certificate key file")?;
        let key = match &self.key_password {
            Some(password) => decrypt_private_key(&pem, password, &self.key_file)?,
            None => private_key(&pem, &self.key_file)?,
        };
        let ca_pem = read_pem_file(&self.ca_file, "CA file")?;
        let mut roots = RootCertStore::empty();
        for cert in certificates(&ca_pem, &self.ca_file, "CA file")? {
            roots.add(cert).map_err(|e| {
                format!(
                    "the CA file {} holds a certificate that cannot be used: {e}",
                    self.ca_file.display()
                )
            })?;
        }
        let roots = Arc::new(roots);
        let strict = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .map_err(|e| format!("cannot use the CA file {}: {e}", self.ca_file.display()))?;
        let mut builder = WebPkiClientVerifier::builder_with_provider(roots, provider());
        if self.allow_without_certificates {
            builder = builder.allow_unauthenticated();
        }
        let mut verifier = builder
            .build()
            .map_err(|e| format!("cannot use the CA file {}: {e}", self.ca_file.display()))?;
        if self.allow_invalid_certificates {
            verifier = Arc::new(AllowInvalid(verifier));
        }
        let config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&self.versions)
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| {
                format!(
                    "Can not set up PEM key file {}: {e}",
                    self.key_file.display()
                )
            })?;
        Ok(Loaded {
            config: Arc::new(config),
            strict,
        })
    }
}

impl Tls {
    /// Reads the certificate, key and CA files for a mode other than `disabled` (`None`
    /// for `disabled`). The options were checked by [`check_options`].
    pub fn load(c: &Config) -> Result<Option<Tls>, String> {
        if c.tls_mode == TlsMode::Disabled {
            return Ok(None);
        }
        let (Some(key_file), Some(ca_file)) = (&c.tls_certificate_key_file, &c.tls_ca_file) else {
            return Err("need tlsCertificateKeyFile and tlsCAFile when TLS is enabled".into());
        };
        let settings = Settings {
            key_file: key_file.clone(),
            key_password: c.tls_certificate_key_file_password.clone(),
            ca_file: ca_file.clone(),
            allow_without_certificates: c.tls_allow_connections_without_certificates,
            allow_invalid_certificates: c.tls_allow_invalid_certificates,
            versions: protocol_versions(&c.tls_disabled_protocols)?,
        };
        let loaded = settings.read_files()?;
        Ok(Some(Tls {
            mode: c.tls_mode,
            settings,
            current: RwLock::new(Arc::new(loaded)),
            rotating: Mutex::new(()),
            counters: VersionCounters::default(),
        }))
    }

    /// Re-reads the certificate key and CA files (`rotateCertificates`, SIGHUP): new
    /// connections use them; on failure the old ones stay and the error is returned.
    pub fn rotate(&self) -> Result<(), String> {
        let _one_at_a_time = self.rotating.lock().unwrap_or_else(|p| p.into_inner());
        let loaded = self.settings.read_files()?;
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        *current = Arc::new(loaded);
        drop(current);
        info!(id = 4913400, "Successfully rotated X509 certificates.");
        Ok(())
    }

    fn loaded(&self) -> Arc<Loaded> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Turns an accepted socket into a plain or TLS stream, as the mode allows, within
    /// [`HANDSHAKE_TIMEOUT`]; `Ok(None)` when the client left before sending anything.
    pub async fn establish(
        &self,
        tcp: TcpStream,
        peer: SocketAddr,
    ) -> Result<Option<(Stream, Option<PeerInfo>)>, String> {
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.establish_inner(tcp, peer)).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "SSLHandshakeFailed: the client sent no complete message or TLS handshake within {}s",
                HANDSHAKE_TIMEOUT.as_secs()
            )),
        }
    }

    async fn establish_inner(
        &self,
        tcp: TcpStream,
        peer: SocketAddr,
    ) -> Result<Option<(Stream, Option<PeerInfo>)>, String> {
        match sniff(&tcp).await.map_err(|e| e.to_string())? {
            Sniffed::Closed => Ok(None),
            Sniffed::Plain if self.mode == TlsMode::RequireTls => Err(
                "SSLHandshakeFailed: The server is configured to only allow SSL connections".into(),
            ),
            Sniffed::Plain => {
                if self.mode == TlsMode::PreferTls {
                    info!(remote = %peer,
                          "SSL mode is set to 'preferred' and connection is not using SSL");
                }
                Ok(Some((Stream::Plain(tcp), None)))
            }
            Sniffed::Tls => {
                let loaded = self.loaded();
                let acceptor = tokio_rustls::TlsAcceptor::from(loaded.config.clone());
                let stream = acceptor
                    .accept(tcp)
                    .await
                    .map_err(|e| format!("SSLHandshakeFailed: {e}"))?;
                let conn = stream.get_ref().1;
                let version = match conn.protocol_version() {
                    Some(rustls::ProtocolVersion::TLSv1_3) => {
                        self.counters.tls13.fetch_add(1, Relaxed);
                        "1.3"
                    }
                    Some(rustls::ProtocolVersion::TLSv1_2) => {
                        self.counters.tls12.fetch_add(1, Relaxed);
                        "1.2"
                    }
                    _ => {
                        self.counters.unknown.fetch_add(1, Relaxed);
                        "unknown"
                    }
                };
                let subject = match conn.peer_certificates() {
                    Some([end_entity, intermediates @ ..]) => {
                        let valid = !self.settings.allow_invalid_certificates
                            || loaded
                                .strict
                                .verify_client_cert(end_entity, intermediates, UnixTime::now())
                                .is_ok();
                        if valid { subject_of(end_entity) } else { None }
                    }
                    _ => None,
                };
                Ok(Some((
                    Stream::Tls(Box::new(stream)),
                    Some(PeerInfo { version, subject }),
                )))
            }
        }
    }
}

/// A client connection's byte stream: plain TCP or TLS over TCP.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS (boxed: the TLS state is large and the plain variant stays small).
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Cli;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let mut all = vec!["cairn"];
        all.extend_from_slice(args);
        Cli::parse_from_args(all)
            .map(|c| c.config)
            .map_err(|e| e.to_string())
    }

    /// A CA, a server certificate (SAN localhost/127.0.0.1) and a client certificate, as PEM
    /// files in a temporary directory.
    struct Pki {
        dir: PathBuf,
    }

    impl Pki {
        fn new(name: &str) -> Pki {
            use rcgen::{
                BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
                KeyPair,
            };
            let dir =
                std::env::temp_dir().join(format!("cairn-tls-unit-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let ca_key = KeyPair::generate().unwrap();
            let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            ca.distinguished_name.push(DnType::CommonName, "Unit CA");
            let ca_cert = ca.self_signed(&ca_key).unwrap();
            std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
            let issuer = Issuer::new(ca, ca_key);
            let key = KeyPair::generate().unwrap();
            let mut server =
                CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
            server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            let cert = server.signed_by(&key, &issuer).unwrap();
            std::fs::write(
                dir.join("server.pem"),
                format!("{}{}", cert.pem(), key.serialize_pem()),
            )
            .unwrap();
            std::fs::write(dir.join("cert-only.pem"), cert.pem()).unwrap();
            let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
            client.distinguished_name.push(DnType::CountryName, "US");
            client
                .distinguished_name
                .push(DnType::OrganizationName, "Cairn, Inc.");
            client.distinguished_name.push(DnType::CommonName, "alice");
            client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            let ckey = KeyPair::generate().unwrap();
            let ccert = client.signed_by(&ckey, &issuer).unwrap();
            std::fs::write(dir.join("client.der"), ccert.der()).unwrap();
            std::fs::write(dir.join("client.key.der"), ckey.serialized_der()).unwrap();
            Pki { dir }
        }

        fn path(&self, f: &str) -> String {
            self.dir.join(f).display().to_string()
        }
    }

    impl Drop for Pki {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn option_combinations_are_checked_like_mongod() {
        assert_eq!(parse(&[]).unwrap().tls_mode, TlsMode::Disabled);
        let e = parse(&["--tls-ca-file", "/x"]).unwrap_err();
        assert!(e.contains("need to enable TLS via the tlsMode flag"), "{e}");
        let e = parse(&["--tls-mode", "requireTLS"]).unwrap_err();
        assert!(e.contains("need tlsCertificateKeyFile"), "{e}");
        let e = parse(&["--tls-mode", "allowTLS", "--tls-certificate-key-file", "/s"]).unwrap_err();
        assert!(e.contains("without specifying a chain of trust"), "{e}");
        let e = parse(&["--tlsMode", "requireSSL"]).unwrap_err();
        assert!(e.contains("requireSSL"), "{e}");
        let ok = [
            "--tlsMode",
            "preferTLS",
            "--tlsCertificateKeyFile",
            "/s",
            "--tlsCAFile",
            "/c",
            "--tls-disabled-protocols",
            "TLS1_0,TLS1_1",
        ];
        let c = parse(&ok).unwrap();
        assert_eq!(c.tls_mode, TlsMode::PreferTls);
        assert_eq!(c.tls_disabled_protocols, ["TLS1_0", "TLS1_1"]);
        let mut bad = ok.to_vec();
        bad.extend(["--tls-disabled-protocols", "TLS1_2,TLS1_3"]);
        assert!(parse(&bad).unwrap_err().contains("leaves no protocol"));
        let mut bad = ok.to_vec();
        bad.extend(["--tls-disabled-protocols", "SSL3"]);
        assert!(
            parse(&bad)
                .unwrap_err()
                .contains("Unrecognized tlsDisabledProtocols")
        );
    }

    #[test]
    fn protocols_left_after_disabling() {
        let v = protocol_versions(&["TLS1_3".into()]).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].version, rustls::ProtocolVersion::TLSv1_2);
        assert_eq!(protocol_versions(&["none".into()]).unwrap().len(), 2);
    }

    #[test]
    fn loads_and_rotates_certificates() {
        let pki = Pki::new("load");
        let args = |key: &str| {
            vec![
                "--tls-mode".to_string(),
                "requireTLS".into(),
                "--tls-certificate-key-file".into(),
                pki.path(key),
                "--tls-ca-file".into(),
                pki.path("ca.pem"),
            ]
        };
        let config = |key: &str| {
            let a = args(key);
            parse(&a.iter().map(String::as_str).collect::<Vec<_>>()).unwrap()
        };
        let tls = Tls::load(&config("server.pem")).unwrap().unwrap();
        assert_eq!(tls.mode, TlsMode::RequireTls);
        assert!(Tls::load(&parse(&[]).unwrap()).unwrap().is_none());

        let e = Tls::load(&config("missing.pem")).unwrap_err();
        assert!(e.contains("cannot read the certificate key file"), "{e}");
        let e = Tls::load(&config("cert-only.pem")).unwrap_err();
        assert!(e.contains("holds no private key"), "{e}");
        let e = Tls::load(&config("ca.pem")).unwrap_err();
        assert!(e.contains("holds no private key"), "{e}");

        // A failed rotation keeps the old configuration.
        let before = tls.loaded();
        std::fs::write(pki.dir.join("server.pem"), "garbage").unwrap();
        let e = tls.rotate().unwrap_err();
        assert!(e.contains("holds no certificate"), "{e}");
        assert!(Arc::ptr_eq(&before, &tls.loaded()));
    }

    #[test]
    fn encrypted_keys_need_their_password() {
        let pki = Pki::new("enc");
        let key = rcgen::KeyPair::generate().unwrap();
        // Encrypted as operators do it: `openssl pkcs8 -topk8 -v2 aes-256-cbc`.
        std::fs::write(pki.dir.join("plain.pem"), key.serialize_pem()).unwrap();
        let out = std::process::Command::new("openssl")
            .args([
                "pkcs8",
                "-topk8",
                "-v2",
                "aes-256-cbc",
                "-passout",
                "pass:s3cret",
                "-in",
            ])
            .arg(pki.dir.join("plain.pem"))
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pem = String::from_utf8(out.stdout).unwrap();
        assert!(pem.contains("BEGIN ENCRYPTED PRIVATE KEY"));
        let path = pki.dir.join("enc.pem");
        let e = private_key(pem.as_bytes(), &path).unwrap_err();
        assert!(e.contains("is encrypted: give its password"), "{e}");
        let e = decrypt_private_key(pem.as_bytes(), "wrong", &path).unwrap_err();
        assert!(e.contains("cannot decrypt"), "{e}");
        let k = decrypt_private_key(pem.as_bytes(), "s3cret", &path).unwrap();
        assert_eq!(k.secret_der(), key.serialized_der());
        let e = decrypt_private_key(key.serialize_pem().as_bytes(), "x", &path).unwrap_err();
        assert!(
            e.contains("holds no \"ENCRYPTED PRIVATE KEY\" section"),
            "{e}"
        );
    }

    /// A TLS client (trusting the PKI's CA, with `cert` as its certificate) against
    /// [`Tls::establish`] on a loopback socket; returns what the server learned.
    async fn handshake(tls: &Tls, pki: &Pki, cert: Option<&Pki>) -> Option<PeerInfo> {
        let mut roots = RootCertStore::empty();
        let ca = CertificateDer::from_pem_file(pki.dir.join("ca.pem")).unwrap();
        roots.add(ca).unwrap();
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match cert {
            Some(p) => {
                let der = std::fs::read(p.dir.join("client.der")).unwrap();
                let key = std::fs::read(p.dir.join("client.key.der")).unwrap();
                builder
                    .with_client_auth_cert(
                        vec![CertificateDer::from(der)],
                        PrivateKeyDer::Pkcs8(key.into()),
                    )
                    .unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let stream = connector.connect(name, tcp).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            drop(stream);
        });
        let (tcp, peer) = listener.accept().await.unwrap();
        let established = tls.establish(tcp, peer).await;
        client.await.unwrap();
        match established {
            Ok(Some((Stream::Tls(_), info))) => info,
            Ok(Some((Stream::Plain(_), _))) => panic!("a TLS client came out plain"),
            Ok(None) => panic!("closed"),
            Err(_) => None,
        }
    }

    #[tokio::test]
    async fn verified_client_certificates_give_their_subject() {
        let pki = Pki::new("peer");
        let other = Pki::new("peer-other");
        let args = |extra: &[&str]| {
            let mut a = vec![
                "--tls-mode".to_string(),
                "allowTLS".into(),
                "--tls-certificate-key-file".into(),
                pki.path("server.pem"),
                "--tls-ca-file".into(),
                pki.path("ca.pem"),
            ];
            a.extend(extra.iter().map(|s| s.to_string()));
            parse(&a.iter().map(String::as_str).collect::<Vec<_>>()).unwrap()
        };
        let strict = Tls::load(&args(&[])).unwrap().unwrap();
        let info = handshake(&strict, &pki, Some(&pki))
            .await
            .expect("handshake");
        assert_eq!(info.version, "1.3");
        let subject = info.subject.expect("subject");
        assert!(subject.contains("CN=alice"), "{subject}");
        // No certificate, or one from another CA: the handshake fails.
        assert_eq!(handshake(&strict, &pki, None).await, None);
        assert_eq!(handshake(&strict, &pki, Some(&other)).await, None);
        assert_eq!(strict.counters.tls13.load(Relaxed), 1);

        let lenient = Tls::load(&args(&["--tls-allow-invalid-certificates"]))
            .unwrap()
            .unwrap();
        let info = handshake(&lenient, &pki, Some(&other))
            .await
            .expect("accepted");
        assert_eq!(info.subject, None, "an invalid certificate names no one");
        let info = handshake(&lenient, &pki, Some(&pki))
            .await
            .expect("accepted");
        assert!(info.subject.is_some());

        let optional = Tls::load(&args(&["--tls-allow-connections-without-certificates"]))
            .unwrap()
            .unwrap();
        let info = handshake(&optional, &pki, None)
            .await
            .expect("no certificate");
        assert_eq!(info.subject, None);
        assert_eq!(handshake(&optional, &pki, Some(&other)).await, None);
    }

    #[test]
    fn client_subject_is_rfc2253() {
        let pki = Pki::new("subject");
        let path = pki.dir.join("client.der");
        let der = std::fs::read(&path).unwrap();
        // The oracle: the form mongod uses for X.509 user names.
        let out = std::process::Command::new("openssl")
            .args([
                "x509", "-inform", "DER", "-noout", "-subject", "-nameopt", "RFC2253", "-in",
            ])
            .arg(&path)
            .output()
            .expect("openssl");
        let text = String::from_utf8(out.stdout).unwrap();
        let want = text.trim().strip_prefix("subject=").unwrap();
        assert!(
            want.contains("CN=alice") && want.contains("O=Cairn\\, Inc."),
            "{want}"
        );
        assert_eq!(subject_of(&der).unwrap(), want);
        assert_eq!(subject_of(b"not a certificate"), None);
    }
}
