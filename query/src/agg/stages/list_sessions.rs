//! `$listLocalSessions` and `$listSessions`: the logical sessions the server knows
//! ([`crate::agg::Host::sessions`]), one `{_id: {id, uid}, lastUse}` document each.
//!
//! `$listLocalSessions` runs as the first stage of `{aggregate: 1}` (73 otherwise);
//! `$listSessions` on the `config.system.sessions` collection. Options: `{}` (the caller's
//! sessions), `{allUsers: true}`, or `{users: [{user, db}]}`. Without authentication every
//! session belongs to the same unauthenticated user, so `{}` and `allUsers` list them all and
//! a list of named users matches none.

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf, rawdoc, spec::BinarySubtype};

use crate::agg::{Constraints, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage};
use crate::error::{QueryError, Result};

use cairn_storage::sessions::NO_AUTH_UID;

/// A parsed `$listLocalSessions` / `$listSessions`.
#[derive(Debug)]
pub struct ListSessions {
    name: &'static str,
    spec: RawDocumentBuf,
    /// Some named users were asked for: no unauthenticated session matches.
    none: bool,
}

fn options(name: &'static str, arg: RawBsonRef<'_>) -> Result<Arc<dyn Stage>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(QueryError::TypeMismatch(format!(
            "{name} options must be specified in an object, but found: {}",
            cairn_storage::display::type_name(arg)
        )));
    };
    let mut none = false;
    let mut all_users = false;
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match (k.as_str(), v) {
            ("allUsers", RawBsonRef::Boolean(b)) => all_users = b,
            ("users", RawBsonRef::Array(a)) => {
                for u in a {
                    let u = u.map_err(|e| QueryError::BadValue(e.to_string()))?;
                    let RawBsonRef::Document(u) = u else {
                        return Err(QueryError::TypeMismatch(format!(
                            "BSON field 'ListSessionsSpec.users' is the wrong type '{}', expected type 'object'",
                            cairn_storage::display::type_name(u)
                        )));
                    };
                    for f in ["user", "db"] {
                        if !matches!(u.get(f), Ok(Some(RawBsonRef::String(_)))) {
                            return Err(QueryError::Location(
                                40414,
                                format!(
                                    "BSON field 'ListSessionsSpec.users.{f}' is missing but a required field"
                                ),
                            ));
                        }
                    }
                    none = true;
                }
            }
            ("allUsers", other) | ("users", other) => {
                return Err(QueryError::TypeMismatch(format!(
                    "BSON field 'ListSessionsSpec.{}' is the wrong type '{}'",
                    k.as_str(),
                    cairn_storage::display::type_name(other)
                )));
            }
            ("$_internalPredicate", _) => {}
            (other, _) => {
                return Err(QueryError::Location(
                    40415,
                    format!("BSON field 'ListSessionsSpec.{other}' is an unknown field."),
                ));
            }
        }
    }
    if all_users && none {
        return Err(QueryError::Location(
            31106,
            format!("The {name} stage allows either allUsers:true or a list of users, not both"),
        ));
    }
    Ok(Arc::new(ListSessions {
        name,
        spec: d.to_owned(),
        none,
    }))
}

/// Parses `{$listLocalSessions: {…}}`.
pub fn parse_local(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    if cx.coll.is_some() {
        return Err(QueryError::Location(
            73,
            "$listLocalSessions must be run against the database with {aggregate: 1}, not a collection"
                .into(),
        ));
    }
    Ok(vec![options("$listLocalSessions", arg)?])
}

/// Parses `{$listSessions: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    if cx.db != "config" || cx.coll.as_deref() != Some("system.sessions") {
        return Err(QueryError::Location(
            73,
            "$listSessions may only be run against config.system.sessions".into(),
        ));
    }
    Ok(vec![options("$listSessions", arg)?])
}

impl Stage for ListSessions {
    fn name(&self) -> &'static str {
        self.name
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(self.spec.clone())
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::Exhaustive
    }

    fn constraints(&self) -> Constraints {
        Constraints {
            first: true,
            collectionless: self.name == "$listLocalSessions",
            not_in_facet: true,
            ..Constraints::default()
        }
    }

    fn open(
        self: Arc<Self>,
        _input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(super::Listing::new(self, ListSessions::load)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl ListSessions {
    fn load(&self, cx: &ExecCx<'_>) -> Result<Vec<RawDocumentBuf>> {
        if self.none {
            return Ok(Vec::new());
        }
        Ok(cx
            .host
            .sessions()?
            .into_iter()
            .map(|(id, last_use)| {
                rawdoc! {
                    "_id": {
                        "id": bson::Binary { subtype: BinarySubtype::Uuid, bytes: id.to_vec() },
                        "uid": bson::Binary { subtype: BinarySubtype::Generic, bytes: NO_AUTH_UID.to_vec() },
                    },
                    "lastUse": last_use,
                }
            })
            .collect())
    }
}
