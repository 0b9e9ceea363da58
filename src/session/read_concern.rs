//! `readConcern`: parsed and validated as MongoDB's `ReadConcernArgs` does.
//!
//! Cairn is one data-bearing node, so `local`, `majority`, `linearizable` and `available` all
//! read the latest committed data; `snapshot` reads one point in time (a pinned snapshot
//! outside transactions, the transaction's snapshot inside one). `afterClusterTime` waits for
//! a cluster time that is, on one node, already visible once the clock has reached it.

use bson::{RawBsonRef, RawDocument, Timestamp};

use crate::commands::type_name;
use crate::error::{CommandError, ErrorCode};

/// A read concern level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `local`.
    Local,
    /// `majority`.
    Majority,
    /// `linearizable`.
    Linearizable,
    /// `available`.
    Available,
    /// `snapshot`.
    Snapshot,
}

impl Level {
    /// The level's name.
    pub fn name(self) -> &'static str {
        match self {
            Level::Local => "local",
            Level::Majority => "majority",
            Level::Linearizable => "linearizable",
            Level::Available => "available",
            Level::Snapshot => "snapshot",
        }
    }
}

/// A parsed `readConcern`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadConcern {
    /// `level`, when given.
    pub level: Option<Level>,
    /// `afterClusterTime`.
    pub after_cluster_time: Option<Timestamp>,
    /// `atClusterTime`.
    pub at_cluster_time: Option<Timestamp>,
    /// Whether the command carried a `readConcern` field at all.
    pub present: bool,
}

fn invalid(msg: &str) -> CommandError {
    CommandError::new(ErrorCode::InvalidOptions, msg)
}

fn timestamp(v: RawBsonRef<'_>, field: &str) -> Result<Timestamp, CommandError> {
    match v {
        RawBsonRef::Timestamp(t) => Ok(t),
        other => Err(CommandError::new(
            ErrorCode::TypeMismatch,
            format!(
                "\"{field}\" had the wrong type. Expected timestamp, found {}",
                type_name(&other)
            ),
        )),
    }
}

impl ReadConcern {
    /// Parses the command's `readConcern` (absent → the default, no level).
    pub fn from_command<'a>(
        body: impl crate::commands::Args<'a>,
    ) -> Result<ReadConcern, CommandError> {
        match body.arg("readConcern") {
            Ok(None) => Ok(ReadConcern::default()),
            Ok(Some(RawBsonRef::Document(d))) => ReadConcern::parse(d),
            Ok(Some(_)) => Err(CommandError::new(
                ErrorCode::FailedToParse,
                "readConcern field should be an object",
            )),
            Err(e) => Err(e),
        }
    }

    /// Parses a read concern document.
    pub fn parse(d: &RawDocument) -> Result<ReadConcern, CommandError> {
        let mut rc = ReadConcern {
            present: true,
            ..ReadConcern::default()
        };
        let mut after_op_time = false;
        for el in d.iter() {
            let (k, v) =
                el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            match k.as_str() {
                "level" => {
                    let RawBsonRef::String(s) = v else {
                        return Err(CommandError::new(
                            ErrorCode::TypeMismatch,
                            format!(
                                "\"level\" had the wrong type. Expected string, found {}",
                                type_name(&v)
                            ),
                        ));
                    };
                    rc.level = Some(match s {
                        "local" => Level::Local,
                        "majority" => Level::Majority,
                        "linearizable" => Level::Linearizable,
                        "available" => Level::Available,
                        "snapshot" => Level::Snapshot,
                        _ => {
                            return Err(CommandError::new(
                                ErrorCode::FailedToParse,
                                "readConcern.level must be either 'local', 'majority', 'linearizable', 'available', or 'snapshot'",
                            ));
                        }
                    });
                }
                "afterClusterTime" => {
                    rc.after_cluster_time = Some(timestamp(v, "afterClusterTime")?);
                }
                "atClusterTime" => rc.at_cluster_time = Some(timestamp(v, "atClusterTime")?),
                "afterOpTime" => after_op_time = true,
                // Attached by servers when they forward a read concern.
                "provenance"
                | "allowTransactionTableSnapshot"
                | "waitLastStableRecoveryTimestamp" => {}
                other => {
                    return Err(invalid(&format!(
                        "Unrecognized option in readConcern: {other}"
                    )));
                }
            }
        }
        if after_op_time && rc.after_cluster_time.is_some() {
            return Err(invalid(
                "Can not specify both afterClusterTime and afterOpTime",
            ));
        }
        if let Some(at) = rc.at_cluster_time {
            if rc.level != Some(Level::Snapshot) {
                return Err(invalid(
                    "atClusterTime field can be set only if level is equal to snapshot",
                ));
            }
            if rc.after_cluster_time.is_some() {
                return Err(invalid(
                    "Specifying a timestamp for readConcern snapshot in a causally consistent session is not allowed. See https://docs.mongodb.com/manual/core/read-isolation-consistency-recency/#causal-consistency",
                ));
            }
            if at.time == 0 && at.increment == 0 {
                return Err(invalid("atClusterTime cannot be a null timestamp"));
            }
        }
        if let Some(after) = rc.after_cluster_time {
            if matches!(rc.level, Some(Level::Linearizable | Level::Available)) {
                return Err(invalid(
                    "afterClusterTime field can be set only if level is equal to majority, local, or snapshot",
                ));
            }
            if after.time == 0 && after.increment == 0 {
                return Err(invalid("afterClusterTime cannot be a null timestamp"));
            }
        }
        if after_op_time {
            if rc.level == Some(Level::Snapshot) {
                return Err(invalid(
                    "afterOpTime field cannot be set if level is equal to snapshot",
                ));
            }
            return Err(CommandError::new(
                ErrorCode::NotImplemented,
                "readConcern afterOpTime is internal to replica sets and not supported by Cairn",
            ));
        }
        Ok(rc)
    }

    /// Whether this asks for a snapshot read.
    pub fn is_snapshot(&self) -> bool {
        self.level == Some(Level::Snapshot)
    }

    /// The read concern as MongoDB prints it in "does not support" errors.
    pub fn display(&self) -> String {
        let mut parts = Vec::new();
        if let Some(l) = self.level {
            parts.push(format!("level: \"{}\"", l.name()));
        }
        if let Some(t) = self.after_cluster_time {
            parts.push(format!(
                "afterClusterTime: Timestamp({}, {})",
                t.time, t.increment
            ));
        }
        if let Some(t) = self.at_cluster_time {
            parts.push(format!(
                "atClusterTime: Timestamp({}, {})",
                t.time, t.increment
            ));
        }
        parts.push("provenance: \"clientSupplied\"".into());
        format!("{{ readConcern: {{ {} }} }}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;

    fn code(d: bson::RawDocumentBuf) -> i32 {
        ReadConcern::parse(&d).unwrap_err().code.code()
    }

    #[test]
    fn levels_and_times() {
        let rc = ReadConcern::parse(
            &rawdoc! {"level": "snapshot", "atClusterTime": Timestamp {time: 5, increment: 1}},
        )
        .unwrap();
        assert!(rc.is_snapshot());
        assert_eq!(rc.at_cluster_time.unwrap().time, 5);
        let rc =
            ReadConcern::parse(&rawdoc! {"afterClusterTime": Timestamp {time: 5, increment: 1}})
                .unwrap();
        assert_eq!(rc.level, None);
        assert_eq!(code(rawdoc! {"level": "nope"}), 9);
        assert_eq!(code(rawdoc! {"bogus": 1}), 72);
        assert_eq!(
            code(rawdoc! {"level": "local", "atClusterTime": Timestamp {time: 5, increment: 1}}),
            72
        );
        assert_eq!(
            code(
                rawdoc! {"level": "snapshot", "atClusterTime": Timestamp {time: 5, increment: 1}, "afterClusterTime": Timestamp {time: 5, increment: 1}}
            ),
            72
        );
        assert_eq!(
            code(
                rawdoc! {"level": "linearizable", "afterClusterTime": Timestamp {time: 5, increment: 1}}
            ),
            72
        );
        assert_eq!(
            code(rawdoc! {"level": "snapshot", "atClusterTime": Timestamp {time: 0, increment: 0}}),
            72
        );
        assert_eq!(
            ReadConcern::from_command(&rawdoc! {"find": "c", "readConcern": 1})
                .unwrap_err()
                .code
                .code(),
            9
        );
    }
}
