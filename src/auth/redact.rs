//! Secrets in command documents: what logs, `currentOp` and the profiler show instead.
//!
//! As mongod's `snipForLogging`: `createUser` and `updateUser` show `pwd` as `"xxx"`;
//! `saslStart` and `saslContinue` show `payload` as `"xxx"`; `hello`/`isMaster` show the
//! payload inside `speculativeAuthenticate` the same way.
//!
//! Invariant: every copy of a command document kept beyond the command's run (the
//! running-operation registry, profiler entries, log lines) goes through [`command`].

use std::borrow::Cow;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

/// The field each command keeps secret.
fn sensitive_field(command: &str) -> Option<&'static str> {
    match command {
        "createUser" | "updateUser" => Some("pwd"),
        "saslStart" | "saslContinue" => Some("payload"),
        _ => None,
    }
}

fn replace_field(doc: &RawDocument, field: &str) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    for (k, v) in doc.iter().flatten() {
        if k.as_str() == field {
            out.append(k, "xxx");
        } else {
            out.append(k, v);
        }
    }
    out
}

/// `body` with its secret replaced, or unchanged when it holds none.
pub fn command(body: &RawDocument) -> Cow<'_, RawDocument> {
    let Some(Ok((name, _))) = body.iter().next() else {
        return Cow::Borrowed(body);
    };
    command_named(name.as_str(), body)
}

/// [`command`] for a body whose first key, `name`, the caller already read (the dispatcher's
/// table of the body): the body is not walked again for it.
pub fn command_named<'b>(name: &str, body: &'b RawDocument) -> Cow<'b, RawDocument> {
    if let Some(field) = sensitive_field(name) {
        if matches!(body.get(field), Ok(Some(_))) {
            return Cow::Owned(replace_field(body, field));
        }
        return Cow::Borrowed(body);
    }
    if matches!(name, "hello" | "isMaster" | "ismaster")
        && let Ok(Some(RawBsonRef::Document(spec))) = body.get("speculativeAuthenticate")
        && matches!(spec.get("payload"), Ok(Some(_)))
    {
        let mut out = RawDocumentBuf::new();
        for (k, v) in body.iter().flatten() {
            if k.as_str() == "speculativeAuthenticate" {
                out.append(k, replace_field(spec, "payload"));
            } else {
                out.append(k, v);
            }
        }
        return Cow::Owned(out);
    }
    Cow::Borrowed(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn secrets_are_replaced() {
        let c = rawdoc! {"createUser": "u", "pwd": "secret", "roles": [], "$db": "admin"};
        let r = command(&c);
        assert_eq!(r.get_str("pwd").unwrap(), "xxx");
        assert_eq!(r.get_str("createUser").unwrap(), "u");
        assert_eq!(r.get_str("$db").unwrap(), "admin");
        let s = rawdoc! {"saslContinue": 1, "conversationId": 1, "payload": bson::Binary {subtype: bson::spec::BinarySubtype::Generic, bytes: b"p=abc".to_vec()}};
        assert_eq!(command(&s).get_str("payload").unwrap(), "xxx");
        let h = rawdoc! {"hello": 1, "speculativeAuthenticate": {"saslStart": 1, "payload": "abc", "db": "admin"}};
        assert_eq!(
            command(&h)
                .get_document("speculativeAuthenticate")
                .unwrap()
                .get_str("payload")
                .unwrap(),
            "xxx"
        );
        let f = rawdoc! {"find": "c", "filter": {"pwd": 1}};
        assert!(matches!(command(&f), Cow::Borrowed(_)));
        let u = rawdoc! {"updateUser": "u", "customData": {}};
        assert!(matches!(command(&u), Cow::Borrowed(_)));
        let m = rawdoc! {"ismaster": 1, "speculativeAuthenticate": {"payload": "abc"}};
        for body in [&c, &s, &h, &f, &u, &m] {
            let name = body.iter().next().unwrap().unwrap().0;
            assert_eq!(
                command_named(name.as_str(), body).as_bytes(),
                command(body).as_bytes()
            );
        }
    }
}
