//! `getParameter`: read server parameters (admin only).
//!
//! Forms, as in MongoDB: `{getParameter: "*"}` returns every parameter;
//! `{getParameter: {showDetails: bool, allParameters: bool}, …}` returns details and/or all;
//! anything else returns the parameters named as further fields. Parameters come back in
//! alphabetical order; unknown names are ignored; when nothing matches the answer is
//! InvalidOptions (72) "no option found to get".
//!
//! Every parameter reports the server's real value; the table is [`crate::params`], shared
//! with `setParameter`.

use bson::raw::CStr;
use bson::{RawBsonRef, RawDocumentBuf, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready, type_name};
use crate::error::{CommandError, ErrorCode, key};

/// `getParameter`.
pub static COMMAND: Command = Command {
    name: "getParameter",
    aliases: &[],
    help: "get administrative option(s)\nexample:\n{ getParameter:1, notablescan:1 }\npass a document as the value for getParameter to request options\nexample:\n{ getParameter:{showDetails: true}, notablescan:1}",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::GetParameter]),
    run,
};

fn parse_options(v: RawBsonRef<'_>) -> Result<(bool, bool), CommandError> {
    match v {
        RawBsonRef::String("*") => Ok((false, true)),
        RawBsonRef::Document(d) => {
            let mut show = false;
            let mut all = false;
            for el in d.iter() {
                let (k, v) =
                    el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                let target = match k.as_str() {
                    "showDetails" => &mut show,
                    "allParameters" => &mut all,
                    other => return Err(CommandError::unknown_field("getParameter", other)),
                };
                *target = match v {
                    RawBsonRef::Boolean(_)
                    | RawBsonRef::Int32(_)
                    | RawBsonRef::Int64(_)
                    | RawBsonRef::Double(_)
                    | RawBsonRef::Decimal128(_) => super::truthy(&v),
                    other => {
                        return Err(CommandError::new(
                            ErrorCode::TypeMismatch,
                            format!(
                                "BSON field 'getParameter.{}' is the wrong type '{}', expected types '[bool, long, int, decimal, double']",
                                k.as_str(),
                                type_name(&other)
                            ),
                        ));
                    }
                };
            }
            Ok((show, all))
        }
        _ => Ok((false, false)),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        let body = inv.req.body;
        let first = body
            .iter()
            .next()
            .and_then(|e| e.ok())
            .map(|(_, v)| v)
            .unwrap_or(RawBsonRef::Null);
        let (show, all) = parse_options(first)?;
        let mut out = RawDocumentBuf::new();
        let mut found = false;
        for p in crate::params::PARAMETERS {
            let named = body.get(p.name).ok().flatten().is_some();
            if !(all || named) {
                continue;
            }
            found = true;
            let k: &CStr = key(p.name)?;
            let value = (p.value)(inv.server);
            if show {
                out.append(
                    k,
                    rawdoc! {
                        "value": value,
                        "settableAtRuntime": p.set.is_some(),
                        "settableAtStartup": p.settable_at_startup(),
                    },
                );
            } else {
                out.append(k, value);
            }
        }
        if !found {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "no option found to get",
            ));
        }
        Ok(out.into())
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_forms() {
        assert_eq!(
            parse_options(RawBsonRef::String("*")).unwrap(),
            (false, true)
        );
        assert_eq!(parse_options(RawBsonRef::Int32(1)).unwrap(), (false, false));
        let d = rawdoc! {"showDetails": true, "allParameters": 1};
        assert_eq!(
            parse_options(RawBsonRef::Document(&d)).unwrap(),
            (true, true)
        );
        let bad = rawdoc! {"showDetails": "yes"};
        assert_eq!(
            parse_options(RawBsonRef::Document(&bad))
                .unwrap_err()
                .code
                .code(),
            14
        );
        let unknown = rawdoc! {"verbose": true};
        assert_eq!(
            parse_options(RawBsonRef::Document(&unknown))
                .unwrap_err()
                .code
                .code(),
            40415
        );
    }
}
