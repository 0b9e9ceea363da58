//! SASL conversations as `saslStart`, `saslContinue` and `hello`'s `speculativeAuthenticate`
//! run them: argument parsing, the per-connection conversation ([`Pending`], held in
//! [`crate::client::Client::sasl`]), MongoDB's error mapping and the failure delay.
//!
//! A conversation: `saslStart` parses the client-first message, reads the user's stored
//! credential and answers the server-first message (`conversationId: 1`, always 1 as in
//! mongod); the first `saslContinue` checks the proof and answers `v=<signature>` — done at
//! once when the client asked for `skipEmptyExchange`, otherwise after one more empty
//! exchange. Only when the conversation is done does the user join
//! [`crate::client::Client::auth`].
//!
//! Errors as MongoDB shows them: `saslStart` lets MechanismUnavailable (334) and
//! ProtocolError (17) through and turns everything else — unknown user, bad proof, malformed
//! messages — into AuthenticationFailed (18) `Authentication failed.`; `saslContinue` lets
//! only ProtocolError through. The detailed reason goes to the log (without the payload).
//! Every failed step first waits `authFailedDelayMs`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bson::raw::cstr;
use bson::{Binary, RawBsonRef, RawDocument, RawDocumentBuf, spec::BinarySubtype};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::UserName;
use super::scram::{Conversation, Mechanism, parse_client_first, random_server_nonce};
use super::users;
use crate::client::Client;
use crate::commands::type_name;
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

/// The only conversation id mongod hands out.
pub const CONVERSATION_ID: i32 = 1;

/// A conversation waiting for the client's next message.
#[derive(Clone)]
pub struct Pending {
    db: String,
    user: UserName,
    mech: Mechanism,
    string_payload: bool,
    skip_empty: bool,
    step: Step,
}

#[derive(Clone)]
enum Step {
    Proof(Conversation),
    Empty,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("user", &self.user)
            .field("mech", &self.mech)
            .finish_non_exhaustive()
    }
}

/// `saslStart`'s arguments.
#[derive(Debug, Clone)]
pub struct StartArgs {
    /// The mechanism name.
    pub mechanism: String,
    /// The decoded payload.
    pub payload: Vec<u8>,
    /// Whether the payload came as a base64 string (the reply then answers in kind).
    pub string_payload: bool,
    /// `options.skipEmptyExchange`.
    pub skip_empty: bool,
}

/// Reads a `payload` field: BinData, or a base64 string.
fn payload(cmd: &str, body: &RawDocument) -> Result<(Vec<u8>, bool), CommandError> {
    match body.get("payload") {
        Ok(Some(RawBsonRef::Binary(b))) => Ok((b.bytes.to_vec(), false)),
        Ok(Some(RawBsonRef::String(s))) => B64
            .decode(s)
            .map(|p| (p, true))
            .map_err(|_| CommandError::bad_value("Invalid base64 in SASL payload")),
        Ok(Some(other)) => Err(CommandError::wrong_type(
            &format!("{cmd}.payload"),
            type_name(&other),
            "[string, binData]",
        )),
        Ok(None) => Err(CommandError::missing_field(&format!("{cmd}.payload"))),
        Err(e) => Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
}

/// Parses `saslStart` (or the body of `speculativeAuthenticate`).
pub fn parse_start(cmd: &str, body: &RawDocument) -> Result<StartArgs, CommandError> {
    let mechanism = match body.get("mechanism") {
        Ok(Some(RawBsonRef::String(s))) => s.to_string(),
        Ok(Some(other)) => {
            return Err(CommandError::wrong_type(
                &format!("{cmd}.mechanism"),
                type_name(&other),
                "string",
            ));
        }
        _ => return Err(CommandError::missing_field(&format!("{cmd}.mechanism"))),
    };
    let (payload, string_payload) = payload(cmd, body)?;
    let mut skip_empty = false;
    if let Some(opts) = crate::commands::opt_document(body, cmd, "options")?
        && let Ok(Some(v)) = opts.get("skipEmptyExchange")
    {
        let RawBsonRef::Boolean(b) = v else {
            return Err(CommandError::bad_value("skipEmptyExchange must be boolean"));
        };
        skip_empty = b;
    }
    Ok(StartArgs {
        mechanism,
        payload,
        string_payload,
        skip_empty,
    })
}

/// The generic failure every client sees.
pub fn authentication_failed() -> CommandError {
    CommandError::new(ErrorCode::Location(18), "Authentication failed.")
}

async fn failure_delay(server: &ServerState) {
    let ms = server.auth.failed_delay_ms.load(Ordering::Relaxed);
    if ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

fn log_failure(client: &Client, mech: &str, user: Option<&UserName>, db: &str, e: &CommandError) {
    tracing::info!(id = 20249, mechanism = mech,
                   principalName = user.map(|u| u.user.as_str()).unwrap_or(""),
                   authenticationDatabase = db, remote = %client.peer,
                   error = %e.message, "Authentication failed");
}

fn payload_value(bytes: &[u8], as_string: bool) -> bson::RawBson {
    if as_string {
        bson::RawBson::String(B64.encode(bytes))
    } else {
        bson::RawBson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: bytes.to_vec(),
        })
    }
}

fn reply(done: bool, payload: &[u8], as_string: bool) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    out.append(cstr!("conversationId"), CONVERSATION_ID);
    out.append(cstr!("done"), done);
    out.append(cstr!("payload"), payload_value(payload, as_string));
    out
}

/// Starts a conversation on `db` (`saslStart`, or a speculative one from `hello`).
pub async fn start(
    server: &Arc<ServerState>,
    client: &mut Client,
    db: &str,
    args: StartArgs,
) -> Result<RawDocumentBuf, CommandError> {
    client.sasl = None;
    let mut user = None;
    let r = start_inner(server, client, db, &args, &mut user).await;
    match r {
        Ok(out) => Ok(out),
        Err(e) => {
            log_failure(client, &args.mechanism, user.as_ref(), db, &e);
            failure_delay(server).await;
            match e.code.code() {
                17 | 334 => Err(e),
                _ => Err(authentication_failed()),
            }
        }
    }
}

async fn start_inner(
    server: &Arc<ServerState>,
    client: &mut Client,
    db: &str,
    args: &StartArgs,
    who: &mut Option<UserName>,
) -> Result<RawDocumentBuf, CommandError> {
    let mech = Mechanism::from_name(&args.mechanism)
        .filter(|_| db != "$external")
        .ok_or_else(|| {
            CommandError::new(
                ErrorCode::Location(334),
                format!(
                    "Unsupported mechanism '{}' on authentication database '{db}'",
                    args.mechanism
                ),
            )
        })?;
    let first = parse_client_first(&args.payload)?;
    let user = UserName {
        user: first.user.clone(),
        db: db.to_string(),
    };
    *who = Some(user.clone());
    let store = server.store.clone();
    let name = user.clone();
    let doc = crate::blocking::run(move || users::get(&store, &name)).await?;
    let Some(doc) = doc else {
        return Err(CommandError::new(
            ErrorCode::Location(11),
            format!(
                "Could not find user \"{}\" for db \"{}\"",
                user.user, user.db
            ),
        ));
    };
    let Some(cred) = users::credential(&doc, mech) else {
        return Err(CommandError::new(
            ErrorCode::Location(334),
            format!(
                "Unable to use {0} based authentication for user without any {0} credentials registered",
                mech.name()
            ),
        ));
    };
    let (conv, server_first) = Conversation::start(mech, &first, cred, &random_server_nonce());
    client.sasl = Some(Box::new(Pending {
        db: db.to_string(),
        user,
        mech,
        string_payload: args.string_payload,
        skip_empty: args.skip_empty,
        step: Step::Proof(conv),
    }));
    Ok(reply(false, server_first.as_bytes(), args.string_payload))
}

/// `saslContinue`: the next step of the connection's conversation.
pub async fn step(
    server: &Arc<ServerState>,
    client: &mut Client,
    db: &str,
    body: &RawDocument,
) -> Result<RawDocumentBuf, CommandError> {
    let id = match body.get("conversationId") {
        Ok(Some(RawBsonRef::Int32(i))) => i64::from(i),
        Ok(Some(RawBsonRef::Int64(i))) => i,
        Ok(Some(RawBsonRef::Double(d))) if d.fract() == 0.0 && d.is_finite() => d as i64,
        Ok(Some(other)) => {
            return Err(CommandError::wrong_type(
                "saslContinue.conversationId",
                type_name(&other),
                "int",
            ));
        }
        _ => {
            return Err(CommandError::missing_field("saslContinue.conversationId"));
        }
    };
    let (input, _) = payload("saslContinue", body)?;
    let pending = client.sasl.take();
    let (mech, user) = pending
        .as_ref()
        .map(|p| (p.mech.name(), Some(p.user.clone())))
        .unwrap_or(("", None));
    match step_inner(client, db, id, pending, &input) {
        Ok(out) => Ok(out),
        Err(e) => {
            log_failure(client, mech, user.as_ref(), db, &e);
            failure_delay(server).await;
            match e.code.code() {
                17 => Err(e),
                _ => Err(authentication_failed()),
            }
        }
    }
}

fn step_inner(
    client: &mut Client,
    db: &str,
    id: i64,
    pending: Option<Box<Pending>>,
    input: &[u8],
) -> Result<RawDocumentBuf, CommandError> {
    let Some(mut p) = pending else {
        return Err(CommandError::new(
            ErrorCode::ProtocolError,
            "No SASL session state found",
        ));
    };
    if id != i64::from(CONVERSATION_ID) {
        return Err(CommandError::new(
            ErrorCode::ProtocolError,
            "sasl: Mismatched conversation id",
        ));
    }
    if p.db != db {
        return Err(CommandError::new(
            ErrorCode::ProtocolError,
            "Attempt to switch database target during SASL authentication.",
        ));
    }
    match std::mem::replace(&mut p.step, Step::Empty) {
        Step::Proof(conv) => {
            let server_final = conv.finish(input)?;
            if p.skip_empty {
                complete(client, &p)?;
                return Ok(reply(true, server_final.as_bytes(), p.string_payload));
            }
            let out = reply(false, server_final.as_bytes(), p.string_payload);
            client.sasl = Some(p);
            Ok(out)
        }
        Step::Empty => {
            complete(client, &p)?;
            Ok(reply(true, b"", p.string_payload))
        }
    }
}

/// Attaches the user of a finished conversation to the connection.
fn complete(client: &mut Client, p: &Pending) -> Result<(), CommandError> {
    attach(client, &p.user, p.mech.name())
}

/// Attaches an authenticated user to the connection (one user per connection, as mongod).
pub fn attach(client: &mut Client, user: &UserName, mechanism: &str) -> Result<(), CommandError> {
    if let Some(prev) = client.auth.users.first()
        && prev != user
    {
        return Err(CommandError::new(
            ErrorCode::Location(18),
            format!(
                "Each client connection may only be authenticated once. Previously authenticated as: {}@{}",
                prev.user, prev.db
            ),
        ));
    }
    if client.auth.users.is_empty() {
        client.auth.users.push(user.clone());
    }
    tracing::info!(id = 20250, mechanism, principalName = %user.user,
                   authenticationDatabase = %user.db, remote = %client.peer,
                   "Authentication succeeded");
    Ok(())
}

/// MONGODB-X509: authenticates the connection as the `$external` user named by its verified
/// TLS client certificate's subject (RFC 2253). `user`, when given, must be that subject.
/// Returns the user; every refusal but a protocol error is the caller's generic failure,
/// with the reason for the log.
pub async fn x509(
    server: &Arc<ServerState>,
    client: &mut Client,
    db: &str,
    user: Option<&str>,
) -> Result<Result<UserName, String>, CommandError> {
    if db != "$external" {
        return Err(CommandError::new(
            ErrorCode::ProtocolError,
            "X.509 authentication must always use the $external database.",
        ));
    }
    let Some(tls) = &client.tls else {
        return Err(CommandError::new(
            ErrorCode::ProtocolError,
            "SSL support is required for the MONGODB-X509 mechanism.",
        ));
    };
    let Some(subject) = tls.subject.clone() else {
        return Ok(Err("No verified subject name available from client".into()));
    };
    if user.is_some_and(|u| !u.is_empty() && u != subject) {
        return Ok(Err(
            "There is no x.509 client certificate matching the user.".into(),
        ));
    }
    let name = UserName {
        user: subject,
        db: "$external".into(),
    };
    let store = server.store.clone();
    let lookup = name.clone();
    if crate::blocking::run(move || super::users::get(&store, &lookup))
        .await?
        .is_none()
    {
        return Ok(Err(format!(
            "Could not find user \"{}\" for db \"$external\"",
            name.user
        )));
    }
    attach(client, &name, "MONGODB-X509")?;
    Ok(Ok(name))
}

/// `hello`'s `saslSupportedMechs: "<db>.<user>"`: the mechanisms the user has credentials
/// for, or `None` when there is no such user.
pub async fn supported_mechs(
    server: &Arc<ServerState>,
    spec: RawBsonRef<'_>,
) -> Result<Option<Vec<&'static str>>, CommandError> {
    let RawBsonRef::String(s) = spec else {
        return Err(CommandError::wrong_type(
            "saslSupportedMechs",
            type_name(&spec),
            "string",
        ));
    };
    let Some((db, user)) = s.split_once('.') else {
        return Err(CommandError::bad_value(
            "UserName must contain a '.' separated database.user pair",
        ));
    };
    let name = UserName {
        user: user.to_string(),
        db: db.to_string(),
    };
    let store = server.store.clone();
    let doc = crate::blocking::run(move || users::get(&store, &name)).await?;
    let Some(doc) = doc else {
        tracing::debug!(
            id = 20251,
            "Supported SASL mechanisms requested for unknown user"
        );
        return Ok(None);
    };
    Ok(Some(
        Mechanism::ALL
            .into_iter()
            .filter(|m| users::credential(&doc, *m).is_some())
            .map(Mechanism::name)
            .collect(),
    ))
}

/// `hello`'s `speculativeAuthenticate`: a `saslStart` body plus `db`. Any failure leaves
/// the field out of the reply (`None`), as mongod does.
pub async fn speculative(
    server: &Arc<ServerState>,
    client: &mut Client,
    spec: RawBsonRef<'_>,
) -> Option<RawDocumentBuf> {
    let RawBsonRef::Document(d) = spec else {
        return None;
    };
    let first = d.iter().next()?.ok()?.0.as_str();
    let db = match d.get("db") {
        Ok(Some(RawBsonRef::String(db))) => db.to_string(),
        _ => return None,
    };
    if first == "authenticate" {
        // MONGODB-X509 in one step: the reply is `authenticate`'s.
        if !matches!(
            d.get("mechanism"),
            Ok(Some(RawBsonRef::String("MONGODB-X509")))
        ) {
            return None;
        }
        let user = match d.get("user") {
            Ok(Some(RawBsonRef::String(u))) => Some(u.to_string()),
            _ => None,
        };
        return match x509(server, client, &db, user.as_deref()).await {
            Ok(Ok(name)) => Some(bson::rawdoc! {"dbname": name.db, "user": name.user}),
            _ => None,
        };
    }
    if first != "saslStart" {
        return None;
    }
    let args = parse_start("saslStart", d).ok()?;
    if args.mechanism == "PLAIN" {
        return None;
    }
    start(server, client, &db, args).await.ok()
}
