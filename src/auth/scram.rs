//! SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802, RFC 7677) as MongoDB runs them: credentials,
//! the strict message grammar, and the server side of one conversation.
//!
//! Map:
//! - [`Mechanism`]: the two mechanisms, their hash, HMAC, PBKDF2 and how a password becomes
//!   the PBKDF2 input ([`Mechanism::password_input`]: SHA-1 takes MongoDB's digest
//!   `hex(MD5("<user>:mongo:<pwd>"))`, SHA-256 the SASLprep'd password);
//! - [`Credential`]: what is stored per mechanism (`iterationCount`, `salt`, `storedKey`,
//!   `serverKey`, base64 in the user document) — never the password;
//! - [`ClientFirst`] / [`parse_client_first`], [`parse_client_final`]: the client messages,
//!   parsed strictly with nom;
//! - [`Conversation`]: the server's state between its first message and the client's proof.
//!
//! Invariants: proofs are compared in constant time; nothing here logs or returns a salted
//! password, a key or a proof; every parse error is an error value, never a panic. Errors are
//! [`CommandError`]s whose messages are for the server log — the SASL commands turn them into
//! MongoDB's generic `Authentication failed.` before a client sees them.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bson::{RawDocument, RawDocumentBuf, rawdoc};
use hmac::{KeyInit, Mac};
use nom::IResult;
use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_while, take_while1};
use nom::combinator::{all_consuming, map, opt};
use nom::multi::many0;
use nom::sequence::preceded;
use sha2::Digest;
use subtle::ConstantTimeEq;

use crate::error::{CommandError, ErrorCode};

/// A SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// `SCRAM-SHA-1` (over MongoDB's MD5 password digest).
    Sha1,
    /// `SCRAM-SHA-256` (over the SASLprep'd password).
    Sha256,
}

/// The length of the random part of the server nonce, in bytes (32 base64 characters).
const SERVER_NONCE_BYTES: usize = 24;
/// The shortest client nonce accepted (as mongod).
const MIN_CLIENT_NONCE: usize = 4;

fn failed(reason: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(18), reason)
}

fn bad(reason: impl Into<String>) -> CommandError {
    CommandError::bad_value(reason)
}

impl Mechanism {
    /// Both mechanisms, in MongoDB's order.
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha1, Mechanism::Sha256];

    /// The mechanism's name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }

    /// The mechanism with this (exact) name.
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Salt length: the hash length minus four, as mongod generates.
    pub fn salt_len(self) -> usize {
        match self {
            Mechanism::Sha1 => 16,
            Mechanism::Sha256 => 28,
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => sha1::Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => sha2::Sha256::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => {
                let mut m = <hmac::Hmac<sha1::Sha1> as KeyInit>::new_from_slice(key)
                    .expect("HMAC accepts keys of any length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Mechanism::Sha256 => {
                let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key)
                    .expect("HMAC accepts keys of any length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn salted_password(self, input: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => {
                let mut out = vec![0u8; 20];
                pbkdf2::pbkdf2_hmac::<sha1::Sha1>(input, salt, iterations, &mut out);
                out
            }
            Mechanism::Sha256 => {
                let mut out = vec![0u8; 32];
                pbkdf2::pbkdf2_hmac::<sha2::Sha256>(input, salt, iterations, &mut out);
                out
            }
        }
    }

    /// The string PBKDF2 runs over: for SHA-1 MongoDB's digest `hex(MD5(user:mongo:pwd))`
    /// (no SASLprep), for SHA-256 `SASLprep(pwd)` (BadValue when the password is not a valid
    /// stored string).
    pub fn password_input(self, user: &str, pwd: &str) -> Result<String, CommandError> {
        match self {
            Mechanism::Sha1 => Ok(mongo_digest(user, pwd)),
            Mechanism::Sha256 => stringprep::saslprep(pwd)
                .map(|p| p.into_owned())
                .map_err(|_| bad("Error preparing password: invalid string for SASLprep")),
        }
    }
}

/// MongoDB's password digest: lowercase hex of `MD5("<user>:mongo:<pwd>")`.
pub fn mongo_digest(user: &str, pwd: &str) -> String {
    use md5::Digest as _;
    let d = md5::Md5::digest(format!("{user}:mongo:{pwd}").as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// A stored SCRAM credential.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// PBKDF2 iterations.
    pub iteration_count: u32,
    /// The salt.
    pub salt: Vec<u8>,
    /// `H(ClientKey)`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("iteration_count", &self.iteration_count)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// Derives the credential for `input` (see [`Mechanism::password_input`]).
    pub fn derive(mech: Mechanism, input: &str, salt: &[u8], iterations: u32) -> Credential {
        let salted = mech.salted_password(input.as_bytes(), salt, iterations);
        let client_key = mech.hmac(&salted, b"Client Key");
        Credential {
            iteration_count: iterations,
            salt: salt.to_vec(),
            stored_key: mech.hash(&client_key),
            server_key: mech.hmac(&salted, b"Server Key"),
        }
    }

    /// A new credential for `user`/`pwd` with a fresh random salt.
    pub fn generate(
        mech: Mechanism,
        user: &str,
        pwd: &str,
        iterations: u32,
    ) -> Result<Credential, CommandError> {
        let input = mech.password_input(user, pwd)?;
        Ok(Credential::with_random_salt(mech, &input, iterations))
    }

    /// A credential for a prepared `input` with a fresh random salt of the mechanism's length.
    pub fn with_random_salt(mech: Mechanism, input: &str, iterations: u32) -> Credential {
        use rand::RngCore;
        let mut salt = vec![0u8; mech.salt_len()];
        rand::rng().fill_bytes(&mut salt);
        Credential::derive(mech, input, &salt, iterations)
    }

    /// The stored form `{iterationCount, salt, storedKey, serverKey}`.
    pub fn to_doc(&self) -> RawDocumentBuf {
        rawdoc! {
            "iterationCount": i32::try_from(self.iteration_count).unwrap_or(i32::MAX),
            "salt": B64.encode(&self.salt),
            "storedKey": B64.encode(&self.stored_key),
            "serverKey": B64.encode(&self.server_key),
        }
    }

    /// Reads the stored form; `None` when it is malformed.
    pub fn from_doc(d: &RawDocument) -> Option<Credential> {
        let iterations = match d.get("iterationCount").ok()?? {
            bson::RawBsonRef::Int32(i) => u32::try_from(i).ok()?,
            bson::RawBsonRef::Int64(i) => u32::try_from(i).ok()?,
            bson::RawBsonRef::Double(f) if f.fract() == 0.0 && f > 0.0 && f < 4e9 => f as u32,
            _ => return None,
        };
        let field = |k: &str| B64.decode(d.get_str(k).ok()?).ok();
        Some(Credential {
            iteration_count: iterations,
            salt: field("salt")?,
            stored_key: field("storedKey")?,
            server_key: field("serverKey")?,
        })
    }
}

/// A parsed client-first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The user name (`n=`, with `=2C`/`=3D` decoded; not SASLprep'd, as mongod).
    pub user: String,
    /// The client nonce.
    pub nonce: String,
    /// `client-first-message-bare`, part of the AuthMessage.
    pub bare: String,
}

/// A parsed client-final message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    /// `c=`: base64 of the GS2 header and channel binding data.
    pub channel_binding: String,
    /// `r=`: the combined nonce.
    pub nonce: String,
    /// The message without `,p=…`, part of the AuthMessage.
    pub without_proof: String,
    /// The decoded proof.
    pub proof: Vec<u8>,
}

type PResult<'a, T> = IResult<&'a str, T>;

fn value(i: &str) -> PResult<'_, &str> {
    take_while(|c: char| c != ',')(i)
}

/// `saslname`: any characters but `,`; `=` only as `=2C` or `=3D`.
fn saslname(i: &str) -> PResult<'_, String> {
    let (rest, raw) = take_while1(|c: char| c != ',')(i)?;
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.char_indices();
    while let Some((pos, c)) = chars.next() {
        if c != '=' {
            out.push(c);
            continue;
        }
        match raw.get(pos + 1..pos + 3) {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => {
                return Err(nom::Err::Failure(nom::error::Error::new(
                    i,
                    nom::error::ErrorKind::Escaped,
                )));
            }
        }
        chars.next();
        chars.next();
    }
    Ok((rest, out))
}

/// `printable` without `,` (RFC 5802 nonce characters).
fn nonce(i: &str) -> PResult<'_, &str> {
    take_while1(|c: char| ('\x21'..='\x7e').contains(&c) && c != ',')(i)
}

/// An optional extension `,x=…` (a letter other than the reserved ones).
fn extension(i: &str) -> PResult<'_, &str> {
    preceded(
        tag(","),
        nom::combinator::recognize((
            nom::character::complete::satisfy(|c| c.is_ascii_alphabetic()),
            tag("="),
            value,
        )),
    )
    .parse(i)
}

enum Gs2 {
    NoBinding,
    Binding,
}

fn gs2_header(i: &str) -> PResult<'_, (Gs2, Option<String>)> {
    let flag = alt((
        map(tag("n"), |_| Gs2::NoBinding),
        map(tag("y"), |_| Gs2::NoBinding),
        map(preceded(tag("p="), value), |_| Gs2::Binding),
    ));
    let (i, (flag, _, authzid, _)) =
        (flag, tag(","), opt(preceded(tag("a="), saslname)), tag(",")).parse(i)?;
    Ok((i, (flag, authzid)))
}

/// Parses `gs2-header client-first-message-bare`.
pub fn parse_client_first(payload: &[u8]) -> Result<ClientFirst, CommandError> {
    let text = std::str::from_utf8(payload)
        .map_err(|_| bad("Invalid SCRAM client first message: not UTF-8"))?;
    let (bare, (flag, authzid)) =
        gs2_header(text).map_err(|_| bad("Invalid SCRAM client first message: bad GS2 header"))?;
    if matches!(flag, Gs2::Binding) {
        return Err(bad("Server does not support channel binding"));
    }
    if bare.starts_with("m=") {
        return Err(bad("SCRAM mandatory extensions are not supported"));
    }
    let parsed: PResult<'_, (String, &str, Vec<&str>)> = all_consuming((
        preceded(tag("n="), saslname),
        preceded(tag(",r="), nonce),
        many0(extension),
    ))
    .parse(bare);
    let (_, (user, client_nonce, _)) =
        parsed.map_err(|_| bad("Invalid SCRAM client first message"))?;
    if let Some(a) = authzid
        && a != user
    {
        return Err(bad(
            "SCRAM user name and authorization identity do not match",
        ));
    }
    if client_nonce.len() < MIN_CLIENT_NONCE {
        return Err(bad("Client SCRAM nonce is too short"));
    }
    Ok(ClientFirst {
        user,
        nonce: client_nonce.to_string(),
        bare: bare.to_string(),
    })
}

fn base64_value(i: &str) -> PResult<'_, &str> {
    take_while(|c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=')(i)
}

/// Parses `c=…,r=…[,ext…],p=…`.
pub fn parse_client_final(payload: &[u8]) -> Result<ClientFinal, CommandError> {
    let text = std::str::from_utf8(payload)
        .map_err(|_| bad("Invalid SCRAM client final message: not UTF-8"))?;
    let Some(split) = text.rfind(",p=") else {
        return Err(bad("Invalid SCRAM client final message: missing proof"));
    };
    let (without_proof, proof_part) = text.split_at(split);
    let parsed: PResult<'_, (&str, &str, Vec<&str>)> = all_consuming((
        preceded(tag("c="), base64_value),
        preceded(tag(",r="), nonce),
        many0(extension),
    ))
    .parse(without_proof);
    let (_, (cb, combined, _)) = parsed.map_err(|_| bad("Invalid SCRAM client final message"))?;
    let proof_text: PResult<'_, &str> =
        all_consuming(preceded(tag(",p="), base64_value)).parse(proof_part);
    let (_, proof_text) =
        proof_text.map_err(|_| bad("Invalid SCRAM client final message: bad proof"))?;
    let proof = B64
        .decode(proof_text)
        .map_err(|_| bad("Invalid SCRAM client final message: proof is not base64"))?;
    Ok(ClientFinal {
        channel_binding: cb.to_string(),
        nonce: combined.to_string(),
        without_proof: without_proof.to_string(),
        proof,
    })
}

/// The server side of one SCRAM conversation after its first message.
#[derive(Clone)]
pub struct Conversation {
    mech: Mechanism,
    credential: Credential,
    nonce: String,
    auth_prefix: String,
}

impl std::fmt::Debug for Conversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversation")
            .field("mech", &self.mech)
            .finish_non_exhaustive()
    }
}

/// A fresh random server nonce part (32 base64 characters).
pub fn random_server_nonce() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; SERVER_NONCE_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    B64.encode(bytes)
}

impl Conversation {
    /// Answers `first` for a user holding `credential`: returns the conversation and the
    /// server-first message `r=<client nonce><server nonce>,s=<salt>,i=<iterations>`.
    pub fn start(
        mech: Mechanism,
        first: &ClientFirst,
        credential: Credential,
        server_nonce: &str,
    ) -> (Conversation, String) {
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iteration_count
        );
        let auth_prefix = format!("{},{server_first}", first.bare);
        (
            Conversation {
                mech,
                credential,
                nonce,
                auth_prefix,
            },
            server_first,
        )
    }

    /// The mechanism.
    pub fn mechanism(&self) -> Mechanism {
        self.mech
    }

    /// Checks the client's proof and returns the server-final message `v=<signature>`.
    pub fn finish(&self, payload: &[u8]) -> Result<String, CommandError> {
        let fin = parse_client_final(payload)?;
        if fin.nonce != self.nonce {
            return Err(failed("Unmatched SCRAM nonce received from client"));
        }
        let auth_message = format!("{},{}", self.auth_prefix, fin.without_proof);
        let m = self.mech;
        let signature = m.hmac(&self.credential.stored_key, auth_message.as_bytes());
        if fin.proof.len() != signature.len() {
            return Err(failed("SCRAM authentication failed, storedKey mismatch"));
        }
        let client_key: Vec<u8> = signature
            .iter()
            .zip(&fin.proof)
            .map(|(a, b)| a ^ b)
            .collect();
        let stored = m.hash(&client_key);
        if !bool::from(stored.ct_eq(&self.credential.stored_key)) {
            return Err(failed("SCRAM authentication failed, storedKey mismatch"));
        }
        let server_sig = m.hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_sig)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's side of a conversation, for the vectors.
    fn client_proof(
        mech: Mechanism,
        input: &str,
        salt: &[u8],
        i: u32,
        auth_message: &str,
    ) -> (String, String) {
        let salted = mech.salted_password(input.as_bytes(), salt, i);
        let client_key = mech.hmac(&salted, b"Client Key");
        let stored = mech.hash(&client_key);
        let sig = mech.hmac(&stored, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        let server_key = mech.hmac(&salted, b"Server Key");
        let server_sig = mech.hmac(&server_key, auth_message.as_bytes());
        (B64.encode(proof), B64.encode(server_sig))
    }

    /// Replays a whole conversation with a fixed server nonce and salt.
    #[allow(clippy::too_many_arguments)]
    fn replay(
        mech: Mechanism,
        user: &str,
        pwd: &str,
        client_first: &str,
        server_nonce: &str,
        salt_b64: &str,
        i: u32,
        expected_server_first: &str,
        client_final: &str,
        expected_server_final: &str,
    ) {
        let input = mech.password_input(user, pwd).unwrap();
        let salt = B64.decode(salt_b64).unwrap();
        let cred = Credential::derive(mech, &input, &salt, i);
        let first = parse_client_first(client_first.as_bytes()).unwrap();
        assert_eq!(first.user, user);
        let (conv, server_first) = Conversation::start(mech, &first, cred, server_nonce);
        assert_eq!(server_first, expected_server_first);
        assert_eq!(
            conv.finish(client_final.as_bytes()).unwrap(),
            expected_server_final
        );
        // A flipped proof bit fails.
        let mut bad_final = client_final.to_string();
        let pos = bad_final.rfind("p=").unwrap() + 2;
        let c = if &bad_final[pos..=pos] == "A" {
            "B"
        } else {
            "A"
        };
        bad_final.replace_range(pos..=pos, c);
        assert_eq!(
            conv.finish(bad_final.as_bytes()).unwrap_err().code.code(),
            18
        );
    }

    #[test]
    fn rfc5802_vector() {
        // RFC 5802 §5 runs SCRAM-SHA-1 over the raw password: check the core with it.
        let m = Mechanism::Sha1;
        let salt = B64.decode("QSXCR+Q6sek8bf92").unwrap();
        let am = "n=user,r=fyko+d2lbbFgONRv9qkxdawL,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096,c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j";
        let (proof, server) = client_proof(m, "pencil", &salt, 4096, am);
        assert_eq!(proof, "v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=");
        assert_eq!(server, "rmF9pqV8S7suAoZWja4dJRkFsKQ=");
        let cred = Credential::derive(m, "pencil", &salt, 4096);
        let first = parse_client_first(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL").unwrap();
        let (conv, sf) = Conversation::start(m, &first, cred, "3rfcNHYJY1ZVvWVs7j");
        assert_eq!(
            sf,
            "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
        );
        assert_eq!(
            conv.finish(b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=").unwrap(),
            "v=rmF9pqV8S7suAoZWja4dJRkFsKQ="
        );
    }

    #[test]
    fn mongodb_sha1_vector() {
        // The driver spec's SCRAM-SHA-1 conversation (MongoDB's password digest applied).
        replay(
            Mechanism::Sha1,
            "user",
            "pencil",
            "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
            "Ho+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE",
            "rQ9ZY3MntBeuP3E1TDVC4w==",
            10000,
            "r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000",
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,p=MC2T8BvbmWRckDw8oWl5IVghwCY=",
            "v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=",
        );
    }

    #[test]
    fn rfc7677_sha256_vector() {
        replay(
            Mechanism::Sha256,
            "user",
            "pencil",
            "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            "W22ZaJ0SNY7soEsUEjb6gQ==",
            4096,
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
        );
    }

    #[test]
    fn mongo_digest_is_md5_hex() {
        // hex(MD5("user:mongo:pencil"))
        assert_eq!(
            mongo_digest("user", "pencil"),
            "1c33006ec1ffd90f9cadcbcc0e118200"
        );
    }

    #[test]
    fn saslprep_rfc4013() {
        let p = |s: &str| Mechanism::Sha256.password_input("u", s);
        assert_eq!(p("I\u{00AD}X").unwrap(), "IX");
        assert_eq!(p("user").unwrap(), "user");
        assert_eq!(p("USER").unwrap(), "USER");
        assert_eq!(p("\u{00AA}").unwrap(), "a");
        assert_eq!(p("\u{2168}").unwrap(), "IX");
        assert_eq!(p("\u{2163}").unwrap(), "IV");
        assert!(p("\u{0007}").is_err());
        assert!(p("\u{0627}\u{0031}").is_err());
        // SHA-1 takes the password as is (no SASLprep).
        assert_eq!(
            Mechanism::Sha1.password_input("u", "I\u{00AD}X").unwrap(),
            mongo_digest("u", "I\u{00AD}X")
        );
    }

    #[test]
    fn client_first_grammar() {
        let ok = |s: &str| parse_client_first(s.as_bytes()).unwrap();
        let f = ok("n,,n=a=2Cb=3Dc,r=abcd");
        assert_eq!(f.user, "a,b=c");
        assert_eq!(f.bare, "n=a=2Cb=3Dc,r=abcd");
        assert_eq!(ok("y,,n=u,r=abcdef").nonce, "abcdef");
        assert_eq!(ok("n,a=u,n=u,r=abcd,x=ext").user, "u");
        let err = |s: &[u8]| parse_client_first(s).unwrap_err().message;
        assert_eq!(
            err(b"p=tls-unique,,n=u,r=abcd"),
            "Server does not support channel binding"
        );
        assert_eq!(
            err(b"n,,m=x,n=u,r=abcd"),
            "SCRAM mandatory extensions are not supported"
        );
        assert_eq!(
            err(b"n,a=v,n=u,r=abcd"),
            "SCRAM user name and authorization identity do not match"
        );
        assert_eq!(err(b"n,,n=u,r=abc"), "Client SCRAM nonce is too short");
        for bad in [
            &b""[..],
            b"n",
            b"n,,",
            b"n,,n=,r=abcd",
            b"n,,n=u",
            b"n,,r=abcd,n=u",
            b"n,,n=a=2,r=abcd",
            b"n,,n=a=XY,r=abcd",
            b"x,,n=u,r=abcd",
            b"n,,n=u,r=ab cd",
            b"n,,n=u,r=abcd,",
            b"n,,n=u,r=abcd,1=x",
            b"\xff\xfe",
        ] {
            assert!(parse_client_first(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn client_final_grammar() {
        let f = parse_client_final(b"c=biws,r=abcdefgh,p=AAAA").unwrap();
        assert_eq!(f.without_proof, "c=biws,r=abcdefgh");
        assert_eq!(f.proof, vec![0, 0, 0]);
        for bad in [
            &b""[..],
            b"c=biws,r=abcd",
            b"r=abcd,c=biws,p=AAAA",
            b"c=biws,r=abcd,p=!!",
            b"c=biws,r=abcd,p=AAA",
            b"c=biws,p=AAAA",
            b"c=bi ws,r=abcd,p=AAAA",
            b"c=biws,r=abcd,p=AAAA,x=y",
        ] {
            assert!(parse_client_final(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn credential_round_trips_and_salts_are_random() {
        let a = Credential::generate(Mechanism::Sha256, "u", "p", 4096).unwrap();
        let b = Credential::generate(Mechanism::Sha256, "u", "p", 4096).unwrap();
        assert_eq!(a.salt.len(), 28);
        assert_ne!(a.salt, b.salt);
        assert_eq!(Credential::from_doc(&a.to_doc()).unwrap(), a);
        assert!(Credential::from_doc(&rawdoc! {"iterationCount": 1}).is_none());
        assert!(
            Credential::from_doc(
                &rawdoc! {"iterationCount": 1, "salt": "!", "storedKey": "", "serverKey": ""}
            )
            .is_none()
        );
        let s1 = Credential::generate(Mechanism::Sha1, "u", "p", 4096).unwrap();
        assert_eq!(s1.salt.len(), 16);
        assert!(!format!("{a:?}").contains("salt"));
    }
}
