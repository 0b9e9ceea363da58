//! Privileges: what may be done ([`ActionType`], [`ActionSet`]) on what ([`ResourcePattern`]).
//!
//! Map:
//! - [`ActionType`]: MongoDB's action names, in MongoDB's declaration order (an [`ActionSet`]
//!   lists its actions in that order, as MongoDB prints them);
//! - [`ResourcePattern`]: the grantable resource shapes — `{db, collection}` in its four
//!   forms (any normal resource, a database, a collection name in any database, one
//!   namespace), `{cluster: true}`, `{anyResource: true}` and the `system_buckets` forms;
//! - [`Privilege`]: a resource and its actions, parsed from and rendered to MongoDB's BSON
//!   (`{resource: {...}, actions: [...]}`) with MongoDB's errors for malformed input;
//! - [`PrivilegeSet`]: privileges merged per resource, and the check MongoDB makes — a
//!   target is allowed an action when any pattern that matches the target grants it
//!   ([`ResourcePattern::search_list`]).
//!
//! Invariants: parsing never panics on any input; a [`PrivilegeSet`] holds each resource
//! once, in the order it was first added; `anyAction` in a set means every action.

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::error::{CommandError, ErrorCode};

macro_rules! actions {
    ($($v:ident => $n:literal,)*) => {
        /// One of MongoDB's action types (`resource.actions` names). The variants are
        /// MongoDB's names with the first letter capitalised.
        #[allow(missing_docs)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ActionType { $($v,)* }

        impl ActionType {
            /// Every action, in MongoDB's declaration order.
            pub const ALL: &'static [ActionType] = &[$(ActionType::$v,)*];

            /// MongoDB's name for the action.
            pub fn name(self) -> &'static str {
                match self { $(ActionType::$v => $n,)* }
            }

            /// The action with this name (case-sensitive), if any.
            pub fn parse(s: &str) -> Option<ActionType> {
                match s { $($n => Some(ActionType::$v),)* _ => None }
            }
        }
    };
}

actions! {
    AddShard => "addShard",
    AdvanceClusterTime => "advanceClusterTime",
    AllCollectionStats => "allCollectionStats",
    Analyze => "analyze",
    AnalyzeShardKey => "analyzeShardKey",
    AnyAction => "anyAction",
    AppendOplogNote => "appendOplogNote",
    ApplicationMessage => "applicationMessage",
    AuditConfigure => "auditConfigure",
    AuditLogRotate => "auditLogRotate",
    AuthCheck => "authCheck",
    Authenticate => "authenticate",
    AuthSchemaUpgrade => "authSchemaUpgrade",
    BypassDocumentValidation => "bypassDocumentValidation",
    BypassWriteBlockingMode => "bypassWriteBlockingMode",
    ChangeCustomData => "changeCustomData",
    ChangePassword => "changePassword",
    ChangeOwnPassword => "changeOwnPassword",
    ChangeOwnCustomData => "changeOwnCustomData",
    ChangeStream => "changeStream",
    CheckFreeMonitoringStatus => "checkFreeMonitoringStatus",
    CheckMetadataConsistency => "checkMetadataConsistency",
    CleanupOrphaned => "cleanupOrphaned",
    ClearJumboFlag => "clearJumboFlag",
    CleanupStructuredEncryptionData => "cleanupStructuredEncryptionData",
    CloseAllDatabases => "closeAllDatabases",
    CollMod => "collMod",
    CollStats => "collStats",
    Compact => "compact",
    CompactStructuredEncryptionData => "compactStructuredEncryptionData",
    ConfigureQueryAnalyzer => "configureQueryAnalyzer",
    ConnPoolStats => "connPoolStats",
    ConnPoolSync => "connPoolSync",
    ConvertToCapped => "convertToCapped",
    CpuProfiler => "cpuProfiler",
    CreateCollection => "createCollection",
    CreateDatabase => "createDatabase",
    CreateIndex => "createIndex",
    CreateRole => "createRole",
    CreateSearchIndexes => "createSearchIndexes",
    CreateUser => "createUser",
    DbCheck => "dbCheck",
    DbHash => "dbHash",
    DbStats => "dbStats",
    DropAllRolesFromDatabase => "dropAllRolesFromDatabase",
    DropAllUsersFromDatabase => "dropAllUsersFromDatabase",
    DropCollection => "dropCollection",
    DropConnections => "dropConnections",
    DropDatabase => "dropDatabase",
    DropIndex => "dropIndex",
    DropRole => "dropRole",
    DropSearchIndex => "dropSearchIndex",
    DropUser => "dropUser",
    Emptycapped => "emptycapped",
    EnableProfiler => "enableProfiler",
    EnableSharding => "enableSharding",
    ExportCollection => "exportCollection",
    Find => "find",
    FlushRouterConfig => "flushRouterConfig",
    ForceUuid => "forceUUID",
    Fsync => "fsync",
    FsyncUnlock => "fsyncUnlock",
    GetClusterParameter => "getClusterParameter",
    GetDatabaseVersion => "getDatabaseVersion",
    GetDefaultRWConcern => "getDefaultRWConcern",
    GetCmdLineOpts => "getCmdLineOpts",
    GetLog => "getLog",
    GetParameter => "getParameter",
    GetShardMap => "getShardMap",
    GetShardVersion => "getShardVersion",
    GrantRole => "grantRole",
    GrantPrivilegesToRole => "grantPrivilegesToRole",
    GrantRolesToRole => "grantRolesToRole",
    GrantRolesToUser => "grantRolesToUser",
    HostInfo => "hostInfo",
    Impersonate => "impersonate",
    ImportCollection => "importCollection",
    IndexStats => "indexStats",
    Inprog => "inprog",
    Insert => "insert",
    Internal => "internal",
    InvalidateUserCache => "invalidateUserCache",
    IssueDirectShardOperations => "issueDirectShardOperations",
    KillAnyCursor => "killAnyCursor",
    KillAnySession => "killAnySession",
    KillCursors => "killCursors",
    Killop => "killop",
    ListCachedAndActiveUsers => "listCachedAndActiveUsers",
    ListCollections => "listCollections",
    ListCursors => "listCursors",
    ListDatabases => "listDatabases",
    ListIndexes => "listIndexes",
    ListSampledQueries => "listSampledQueries",
    ListSearchIndexes => "listSearchIndexes",
    ListSessions => "listSessions",
    ListShards => "listShards",
    LogRotate => "logRotate",
    UpdateSearchIndex => "updateSearchIndex",
    MoveChunk => "moveChunk",
    MoveCollection => "moveCollection",
    Netstat => "netstat",
    OidcListKeys => "oidcListKeys",
    OidcRefreshKeys => "oidcRefreshKeys",
    OidReset => "oidReset",
    OperationMetrics => "operationMetrics",
    PlanCacheIndexFilter => "planCacheIndexFilter",
    PlanCacheRead => "planCacheRead",
    PlanCacheWrite => "planCacheWrite",
    QuerySettings => "querySettings",
    QueryStatsRead => "queryStatsRead",
    QueryStatsReadTransformed => "queryStatsReadTransformed",
    RefineCollectionShardKey => "refineCollectionShardKey",
    ReIndex => "reIndex",
    Remove => "remove",
    RemoveShard => "removeShard",
    RenameCollection => "renameCollection",
    RenameCollectionSameDB => "renameCollectionSameDB",
    RepairDatabase => "repairDatabase",
    ReplSetConfigure => "replSetConfigure",
    ReplSetGetConfig => "replSetGetConfig",
    ReplSetGetStatus => "replSetGetStatus",
    ReplSetHeartbeat => "replSetHeartbeat",
    ReplSetReconfig => "replSetReconfig",
    ReplSetResizeOplog => "replSetResizeOplog",
    ReplSetStateChange => "replSetStateChange",
    ReshardCollection => "reshardCollection",
    Resync => "resync",
    RevokeRole => "revokeRole",
    RevokePrivilegesFromRole => "revokePrivilegesFromRole",
    RevokeRolesFromRole => "revokeRolesFromRole",
    RevokeRolesFromUser => "revokeRolesFromUser",
    RotateCertificates => "rotateCertificates",
    RunAsLessPrivilegedUser => "runAsLessPrivilegedUser",
    RunTenantMigration => "runTenantMigration",
    ServerStatus => "serverStatus",
    SetAuthenticationRestriction => "setAuthenticationRestriction",
    SetClusterParameter => "setClusterParameter",
    SetDefaultRWConcern => "setDefaultRWConcern",
    SetFeatureCompatibilityVersion => "setFeatureCompatibilityVersion",
    SetFreeMonitoring => "setFreeMonitoring",
    SetParameter => "setParameter",
    SetUserWriteBlockMode => "setUserWriteBlockMode",
    ShardCollection => "shardCollection",
    ShardedDataDistribution => "shardedDataDistribution",
    ShardingState => "shardingState",
    Shutdown => "shutdown",
    SplitChunk => "splitChunk",
    SplitVector => "splitVector",
    StorageDetails => "storageDetails",
    Top => "top",
    Touch => "touch",
    TrafficRecord => "trafficRecord",
    TransitionFromDedicatedConfigServer => "transitionFromDedicatedConfigServer",
    TransitionToDedicatedConfigServer => "transitionToDedicatedConfigServer",
    Unlock => "unlock",
    UseTenant => "useTenant",
    UseUuid => "useUUID",
    Update => "update",
    UpdateRole => "updateRole",
    UpdateUser => "updateUser",
    Validate => "validate",
    ViewRole => "viewRole",
    ViewUser => "viewUser",
    ApplyOps => "applyOps",
    SetChangeStreamState => "setChangeStreamState",
    GetChangeStreamState => "getChangeStreamState",
}

const WORDS: usize = 3;

/// A set of actions (a bit set indexed by [`ActionType`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ActionSet([u64; WORDS]);

impl ActionSet {
    /// No actions.
    pub const fn empty() -> ActionSet {
        ActionSet([0; WORDS])
    }

    /// The set of `actions`.
    pub fn of(actions: &[ActionType]) -> ActionSet {
        let mut s = ActionSet::empty();
        for a in actions {
            s.add(*a);
        }
        s
    }

    /// Every action (what `anyAction` grants).
    pub fn all() -> ActionSet {
        let mut s = ActionSet::empty();
        for a in ActionType::ALL {
            s.set(*a);
        }
        s
    }

    fn set(&mut self, a: ActionType) {
        let i = a as usize;
        self.0[i / 64] |= 1 << (i % 64);
    }

    fn clear(&mut self, a: ActionType) {
        let i = a as usize;
        self.0[i / 64] &= !(1 << (i % 64));
    }

    /// Adds an action; `anyAction` adds every action.
    pub fn add(&mut self, a: ActionType) {
        if a == ActionType::AnyAction {
            *self = ActionSet::all();
        } else {
            self.set(a);
        }
    }

    /// Whether the set holds `a`.
    pub fn contains(&self, a: ActionType) -> bool {
        let i = a as usize;
        self.0[i / 64] & (1 << (i % 64)) != 0
    }

    /// Adds every action of `other`.
    pub fn add_all(&mut self, other: &ActionSet) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a |= b;
        }
    }

    /// Removes every action of `other` (removing any action also removes `anyAction`).
    pub fn remove_all(&mut self, other: &ActionSet) {
        if other.is_empty() {
            return;
        }
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a &= !b;
        }
        self.clear(ActionType::AnyAction);
    }

    /// Whether every action of `other` is in this set.
    pub fn is_superset(&self, other: &ActionSet) -> bool {
        self.0.iter().zip(other.0).all(|(a, b)| a & b == b)
    }

    /// Whether the two sets share an action.
    pub fn intersects(&self, other: &ActionSet) -> bool {
        self.0.iter().zip(other.0).any(|(a, b)| a & b != 0)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// The actions, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = ActionType> + '_ {
        ActionType::ALL
            .iter()
            .copied()
            .filter(|a| self.contains(*a))
    }

    /// The names MongoDB prints: `["anyAction"]` for the full set, else each action.
    pub fn names(&self) -> Vec<&'static str> {
        if self.contains(ActionType::AnyAction) {
            return vec![ActionType::AnyAction.name()];
        }
        self.iter().map(ActionType::name).collect()
    }
}

/// A grantable resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourcePattern {
    /// `{db: "", collection: ""}`: every normal collection and database (not `system.*`
    /// collections, not the `local` and `config` databases).
    AnyNormal,
    /// `{db: X, collection: ""}`: database X and its normal collections.
    Database(String),
    /// `{db: "", collection: X}`: collection X in any database.
    Collection(String),
    /// `{db: X, collection: Y}`: one namespace.
    Namespace(String, String),
    /// `{cluster: true}`.
    Cluster,
    /// `{anyResource: true}`: everything, including system collections and the cluster.
    Any,
    /// `{system_buckets: ""}`: every time-series buckets collection.
    AnySystemBuckets,
    /// `{db: X, system_buckets: ""}`: every buckets collection in database X.
    AnySystemBucketsInDb(String),
    /// `{system_buckets: X}`: `system.buckets.X` in any database.
    SystemBucketsInAnyDb(String),
    /// `{db: X, system_buckets: Y}`: `X.system.buckets.Y`.
    SystemBuckets(String, String),
}

const BUCKETS_PREFIX: &str = "system.buckets.";

/// Whether `db.coll` is a "normal" namespace (one `AnyNormal` and database patterns cover).
pub fn is_normal_collection(db: &str, coll: &str) -> bool {
    let local_replset = db == "local" && coll.starts_with("replset.");
    !coll.starts_with("system.") && !local_replset
}

fn is_special_db(db: &str) -> bool {
    db == "local" || db == "config"
}

impl ResourcePattern {
    /// The namespace `db.coll` as a check target.
    pub fn ns(db: &str, coll: &str) -> ResourcePattern {
        ResourcePattern::Namespace(db.to_string(), coll.to_string())
    }

    /// The database `db` as a check target.
    pub fn db(db: &str) -> ResourcePattern {
        ResourcePattern::Database(db.to_string())
    }

    /// Every pattern that matches this target (the target itself included), as MongoDB
    /// searches a user's privileges: `anyResource` always; for a normal namespace also any
    /// normal resource (outside `local`/`config`), its database and its collection name;
    /// for a buckets namespace the buckets patterns; for a database any normal resource
    /// (outside `local`/`config`).
    pub fn search_list(&self) -> Vec<ResourcePattern> {
        use ResourcePattern as R;
        let mut out = vec![R::Any];
        match self {
            R::Namespace(db, coll) => {
                if is_normal_collection(db, coll) {
                    if !is_special_db(db) {
                        out.push(R::AnyNormal);
                    }
                    out.push(R::Database(db.clone()));
                } else if let Some(bucket) = coll.strip_prefix(BUCKETS_PREFIX) {
                    out.push(R::AnySystemBuckets);
                    out.push(R::SystemBucketsInAnyDb(bucket.to_string()));
                    out.push(R::AnySystemBucketsInDb(db.clone()));
                    out.push(R::SystemBuckets(db.clone(), bucket.to_string()));
                }
                out.push(R::Collection(coll.clone()));
            }
            R::Database(db) if !is_special_db(db) => out.push(R::AnyNormal),
            _ => {}
        }
        if *self != R::Any {
            out.push(self.clone());
        }
        out
    }

    /// Whether this pattern matches `target`, i.e. appears in `target`'s
    /// [`ResourcePattern::search_list`] (computed without building the list).
    pub fn covers(&self, target: &ResourcePattern) -> bool {
        use ResourcePattern as R;
        if *self == R::Any || self == target {
            return true;
        }
        match target {
            R::Namespace(db, coll) => {
                if let R::Collection(c) = self {
                    return c == coll;
                }
                if is_normal_collection(db, coll) {
                    return match self {
                        R::AnyNormal => !is_special_db(db),
                        R::Database(d) => d == db,
                        _ => false,
                    };
                }
                let Some(bucket) = coll.strip_prefix(BUCKETS_PREFIX) else {
                    return false;
                };
                match self {
                    R::AnySystemBuckets => true,
                    R::SystemBucketsInAnyDb(b) => b == bucket,
                    R::AnySystemBucketsInDb(d) => d == db,
                    R::SystemBuckets(d, b) => d == db && b == bucket,
                    _ => false,
                }
            }
            R::Database(db) => *self == R::AnyNormal && !is_special_db(db),
            _ => false,
        }
    }

    /// Whether this pattern is about database `db` (or could name a collection in it) —
    /// MongoDB's "any action on any resource in the database" test for `listDatabases`.
    pub fn touches_db(&self, db: &str) -> bool {
        use ResourcePattern as R;
        match self {
            R::Any | R::Collection(_) | R::SystemBucketsInAnyDb(_) | R::AnySystemBuckets => true,
            R::AnyNormal => !is_special_db(db),
            R::Database(d)
            | R::Namespace(d, _)
            | R::AnySystemBucketsInDb(d)
            | R::SystemBuckets(d, _) => d == db,
            R::Cluster => false,
        }
    }

    /// The database this pattern names, if it names exactly one.
    pub fn db_name(&self) -> Option<&str> {
        use ResourcePattern as R;
        match self {
            R::Database(d)
            | R::Namespace(d, _)
            | R::AnySystemBucketsInDb(d)
            | R::SystemBuckets(d, _) => Some(d),
            _ => None,
        }
    }

    /// MongoDB's BSON form.
    pub fn to_bson(&self) -> RawDocumentBuf {
        use ResourcePattern as R;
        match self {
            R::AnyNormal => rawdoc! {"db": "", "collection": ""},
            R::Database(d) => rawdoc! {"db": d.as_str(), "collection": ""},
            R::Collection(c) => rawdoc! {"db": "", "collection": c.as_str()},
            R::Namespace(d, c) => rawdoc! {"db": d.as_str(), "collection": c.as_str()},
            R::Cluster => rawdoc! {"cluster": true},
            R::Any => rawdoc! {"anyResource": true},
            R::AnySystemBuckets => rawdoc! {"system_buckets": ""},
            R::AnySystemBucketsInDb(d) => rawdoc! {"db": d.as_str(), "system_buckets": ""},
            R::SystemBucketsInAnyDb(b) => rawdoc! {"system_buckets": b.as_str()},
            R::SystemBuckets(d, b) => rawdoc! {"db": d.as_str(), "system_buckets": b.as_str()},
        }
    }

    /// Parses a `resource` document (`ctx` is the field path used in IDL messages, e.g.
    /// `privilege.resource`). Errors are MongoDB's (BadValue for inconsistent forms, the IDL
    /// errors for unknown fields and wrong types).
    pub fn parse(doc: &RawDocument, ctx: &str) -> Result<ResourcePattern, CommandError> {
        let (mut cluster, mut any) = (None, None);
        let (mut db, mut coll, mut buckets) = (None, None, None);
        for el in doc {
            let (k, v) =
                el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let k = k.as_str();
            let field = format!("{ctx}.{k}");
            match k {
                "cluster" | "anyResource" => {
                    let RawBsonRef::Boolean(b) = v else {
                        return Err(CommandError::wrong_type(
                            &field,
                            crate::commands::type_name(&v),
                            "bool",
                        ));
                    };
                    if k == "cluster" {
                        cluster = Some(b);
                    } else {
                        any = Some(b);
                    }
                }
                "db" | "collection" | "system_buckets" => {
                    let RawBsonRef::String(s) = v else {
                        return Err(CommandError::wrong_type(
                            &field,
                            crate::commands::type_name(&v),
                            "string",
                        ));
                    };
                    match k {
                        "db" => db = Some(s),
                        "collection" => coll = Some(s),
                        _ => buckets = Some(s),
                    }
                }
                _ => {
                    return Err(CommandError::new(
                        ErrorCode::Location(40415),
                        format!("BSON field '{field}' is an unknown field."),
                    ));
                }
            }
        }
        let conflict = |what: &str, found: &str| {
            CommandError::bad_value(format!("{what} conflicts with resource type '{found}'"))
        };
        if let Some(c) = cluster {
            const WHAT: &str = "resource: {cluster: true}";
            if !c {
                return Err(CommandError::bad_value(
                    "resource: {cluster: false} must be true",
                ));
            }
            for (name, present) in [
                ("anyResource", any.is_some()),
                ("db", db.is_some()),
                ("collection", coll.is_some()),
                ("system_buckets", buckets.is_some()),
            ] {
                if present {
                    return Err(conflict(WHAT, name));
                }
            }
            return Ok(ResourcePattern::Cluster);
        }
        if let Some(a) = any {
            const WHAT: &str = "resource: {anyResource: true}";
            if !a {
                return Err(CommandError::bad_value(
                    "resource: {anyResource: false} must be true",
                ));
            }
            for (name, present) in [
                ("db", db.is_some()),
                ("collection", coll.is_some()),
                ("system_buckets", buckets.is_some()),
            ] {
                if present {
                    return Err(conflict(WHAT, name));
                }
            }
            return Ok(ResourcePattern::Any);
        }
        if coll.is_some() && buckets.is_some() {
            return Err(conflict("resource: {collection: '...'}", "system_buckets"));
        }
        if let Some(c) = coll {
            let Some(d) = db else {
                return Err(CommandError::bad_value(
                    "resource {collection: '...'} must include 'db' field as well",
                ));
            };
            if !c.is_empty() && !valid_collection_name(d, c) {
                return Err(CommandError::bad_value(format!(
                    "'{c}' is not a valid collection name"
                )));
            }
            return Ok(match (d.is_empty(), c.is_empty()) {
                (true, true) => ResourcePattern::AnyNormal,
                (true, false) => ResourcePattern::Collection(c.to_string()),
                (false, true) => ResourcePattern::Database(d.to_string()),
                (false, false) => ResourcePattern::ns(d, c),
            });
        }
        if let Some(b) = buckets {
            let d = db.unwrap_or("");
            return Ok(match (d.is_empty(), b.is_empty()) {
                (true, true) => ResourcePattern::AnySystemBuckets,
                (false, true) => ResourcePattern::AnySystemBucketsInDb(d.to_string()),
                (true, false) => ResourcePattern::SystemBucketsInAnyDb(b.to_string()),
                (false, false) => ResourcePattern::SystemBuckets(d.to_string(), b.to_string()),
            });
        }
        Err(CommandError::bad_value(
            "resource pattern must contain 'collection' or 'systemBuckets' specifier",
        ))
    }
}

fn valid_collection_name(db: &str, coll: &str) -> bool {
    if db == "local" && coll == "oplog.$main" {
        return true;
    }
    !coll.starts_with('.') && !coll.contains('\0') && !coll.contains('$')
}

/// A resource and the actions granted on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Privilege {
    /// What the privilege is on.
    pub resource: ResourcePattern,
    /// What it allows.
    pub actions: ActionSet,
}

impl Privilege {
    /// A privilege of `actions` on `resource`.
    pub fn new(resource: ResourcePattern, actions: &[ActionType]) -> Privilege {
        Privilege {
            resource,
            actions: ActionSet::of(actions),
        }
    }

    /// `{resource: {...}, actions: [...]}`.
    pub fn to_bson(&self) -> RawDocumentBuf {
        let mut actions = RawArrayBuf::new();
        for n in self.actions.names() {
            actions.push(n);
        }
        rawdoc! {"resource": self.resource.to_bson(), "actions": actions}
    }

    /// Parses one privilege document (`{resource, actions}`), collecting action names it
    /// does not know into `unknown`.
    pub fn parse(doc: &RawDocument, unknown: &mut Vec<String>) -> Result<Privilege, CommandError> {
        const CTX: &str = "privilege";
        let mut resource = None;
        let mut actions = None;
        for el in doc {
            let (k, v) =
                el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            match k.as_str() {
                "resource" => match v {
                    RawBsonRef::Document(d) => resource = Some(d),
                    other => {
                        return Err(CommandError::wrong_type(
                            "privilege.resource",
                            crate::commands::type_name(&other),
                            "object",
                        ));
                    }
                },
                "actions" => match v {
                    RawBsonRef::Array(a) => actions = Some(a),
                    other => {
                        return Err(CommandError::wrong_type(
                            "privilege.actions",
                            crate::commands::type_name(&other),
                            "array",
                        ));
                    }
                },
                other => {
                    return Err(CommandError::new(
                        ErrorCode::Location(40415),
                        format!("BSON field '{CTX}.{other}' is an unknown field."),
                    ));
                }
            }
        }
        let resource = resource.ok_or_else(|| CommandError::missing_field("privilege.resource"))?;
        let actions = actions.ok_or_else(|| CommandError::missing_field("privilege.actions"))?;
        let resource = ResourcePattern::parse(resource, "privilege.resource")?;
        let mut set = ActionSet::empty();
        let mut n = 0usize;
        for (i, a) in actions.into_iter().enumerate() {
            let a = a.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let RawBsonRef::String(s) = a else {
                return Err(CommandError::wrong_type(
                    &format!("privilege.actions.{i}"),
                    crate::commands::type_name(&a),
                    "string",
                ));
            };
            n += 1;
            match ActionType::parse(s) {
                Some(t) => set.add(t),
                None => unknown.push(s.to_string()),
            }
        }
        if n == 0 {
            return Err(CommandError::bad_value(
                "'actions' field of privilege resource must not be empty",
            ));
        }
        Ok(Privilege {
            resource,
            actions: set,
        })
    }
}

/// Parses a privilege array as the role commands do: every failure is FailedToParse (9)
/// with the underlying reason; unknown action names are `Unrecognized action privilege
/// strings: a,b`.
pub fn parse_privilege_array(arr: &bson::RawArray) -> Result<Vec<Privilege>, CommandError> {
    let fail = |m: String| CommandError::new(ErrorCode::FailedToParse, m);
    let mut out = Vec::new();
    for el in arr {
        let el = el.map_err(|e| fail(e.to_string()))?;
        let RawBsonRef::Document(d) = el else {
            return Err(fail("Elements in privilege arrays must be objects".into()));
        };
        let mut unknown = Vec::new();
        let p = Privilege::parse(d, &mut unknown).map_err(|e| fail(e.message))?;
        if !unknown.is_empty() {
            return Err(fail(format!(
                "Unrecognized action privilege strings: {}",
                unknown.join(",")
            )));
        }
        out.push(p);
    }
    Ok(out)
}

/// Privileges merged per resource (first-added order kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrivilegeSet {
    privileges: Vec<Privilege>,
}

impl PrivilegeSet {
    /// An empty set.
    pub fn new() -> PrivilegeSet {
        PrivilegeSet::default()
    }

    /// Adds a privilege, merging its actions into an existing entry for the same resource.
    pub fn add(&mut self, p: &Privilege) {
        if let Some(e) = self
            .privileges
            .iter_mut()
            .find(|e| e.resource == p.resource)
        {
            e.actions.add_all(&p.actions);
        } else {
            self.privileges.push(p.clone());
        }
    }

    /// Adds every privilege of `ps`.
    pub fn add_all<'a>(&mut self, ps: impl IntoIterator<Item = &'a Privilege>) {
        for p in ps {
            self.add(p);
        }
    }

    /// Removes `p`'s actions from the entry for its resource (dropping an emptied entry).
    pub fn remove(&mut self, p: &Privilege) {
        if let Some(i) = self
            .privileges
            .iter()
            .position(|e| e.resource == p.resource)
        {
            self.privileges[i].actions.remove_all(&p.actions);
            if self.privileges[i].actions.is_empty() {
                self.privileges.remove(i);
            }
        }
    }

    /// The privileges.
    pub fn privileges(&self) -> &[Privilege] {
        &self.privileges
    }

    /// The actions granted on exactly this pattern.
    pub fn actions_on(&self, r: &ResourcePattern) -> ActionSet {
        self.privileges
            .iter()
            .find(|p| p.resource == *r)
            .map(|p| p.actions)
            .unwrap_or_default()
    }

    /// Whether every action of `actions` is granted on `target` by some matching pattern.
    pub fn is_authorized(&self, target: &ResourcePattern, actions: &ActionSet) -> bool {
        let mut granted = ActionSet::empty();
        for p in &self.privileges {
            if p.resource.covers(target) {
                granted.add_all(&p.actions);
                if granted.is_superset(actions) {
                    return true;
                }
            }
        }
        granted.is_superset(actions)
    }

    /// Whether `action` is granted on `target`.
    pub fn allows(&self, target: &ResourcePattern, action: ActionType) -> bool {
        self.is_authorized(target, &ActionSet::of(&[action]))
    }

    /// Whether the privileges grant any action on any resource in database `db`.
    pub fn any_in_db(&self, db: &str) -> bool {
        self.privileges
            .iter()
            .any(|p| !p.actions.is_empty() && p.resource.touches_db(db))
    }

    /// The privileges as a BSON array (`[{resource, actions}, ...]`).
    pub fn to_bson(&self) -> RawArrayBuf {
        let mut arr = RawArrayBuf::new();
        for p in &self.privileges {
            arr.push(p.to_bson());
        }
        arr
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ActionType as A;
    use ResourcePattern as R;

    fn parse(doc: RawDocumentBuf) -> Result<Privilege, CommandError> {
        let mut unknown = Vec::new();
        Privilege::parse(&doc, &mut unknown)
    }

    #[test]
    fn action_names_round_trip() {
        for a in ActionType::ALL {
            assert_eq!(ActionType::parse(a.name()), Some(*a));
        }
        assert_eq!(ActionType::parse("Find"), None);
        assert!(ActionType::ALL.len() <= WORDS * 64);
    }

    #[test]
    fn any_action_is_everything() {
        let s = ActionSet::of(&[A::AnyAction]);
        assert!(s.contains(A::Find) && s.contains(A::Shutdown));
        assert_eq!(s.names(), vec!["anyAction"]);
        let mut t = s;
        t.remove_all(&ActionSet::of(&[A::Find]));
        assert!(!t.contains(A::Find) && !t.contains(A::AnyAction) && t.contains(A::Insert));
    }

    #[test]
    fn resource_forms_parse_and_render() {
        let cases = [
            (rawdoc! {"db": "", "collection": ""}, R::AnyNormal),
            (rawdoc! {"db": "a", "collection": ""}, R::db("a")),
            (
                rawdoc! {"db": "", "collection": "c"},
                R::Collection("c".into()),
            ),
            (rawdoc! {"db": "a", "collection": "c"}, R::ns("a", "c")),
            (rawdoc! {"cluster": true}, R::Cluster),
            (rawdoc! {"anyResource": true}, R::Any),
            (rawdoc! {"system_buckets": ""}, R::AnySystemBuckets),
            (
                rawdoc! {"db": "a", "system_buckets": ""},
                R::AnySystemBucketsInDb("a".into()),
            ),
            (
                rawdoc! {"system_buckets": "b"},
                R::SystemBucketsInAnyDb("b".into()),
            ),
            (
                rawdoc! {"db": "a", "system_buckets": "b"},
                R::SystemBuckets("a".into(), "b".into()),
            ),
        ];
        for (doc, want) in cases {
            let got = ResourcePattern::parse(&doc, "privilege.resource").unwrap();
            assert_eq!(got, want);
            assert_eq!(got.to_bson(), doc);
        }
    }

    #[test]
    fn bad_resources_are_refused_with_mongodb_messages() {
        let cases = [
            (
                rawdoc! {"cluster": false},
                "resource: {cluster: false} must be true",
            ),
            (
                rawdoc! {"cluster": true, "db": "a"},
                "resource: {cluster: true} conflicts with resource type 'db'",
            ),
            (
                rawdoc! {"anyResource": true, "collection": ""},
                "resource: {anyResource: true} conflicts with resource type 'collection'",
            ),
            (
                rawdoc! {"collection": "c"},
                "resource {collection: '...'} must include 'db' field as well",
            ),
            (
                rawdoc! {"db": "a", "collection": "c", "system_buckets": "x"},
                "resource: {collection: '...'} conflicts with resource type 'system_buckets'",
            ),
            (
                rawdoc! {"db": "a"},
                "resource pattern must contain 'collection' or 'systemBuckets' specifier",
            ),
            (
                rawdoc! {"db": "a", "collection": "a$b"},
                "'a$b' is not a valid collection name",
            ),
        ];
        for (doc, msg) in cases {
            let e = ResourcePattern::parse(&doc, "privilege.resource").unwrap_err();
            assert_eq!(e.code, ErrorCode::BadValue, "{doc:?}");
            assert_eq!(e.message, msg);
        }
        let e = ResourcePattern::parse(&rawdoc! {"db": 1, "collection": ""}, "privilege.resource")
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::TypeMismatch);
        let e = ResourcePattern::parse(&rawdoc! {"x": 1}, "privilege.resource").unwrap_err();
        assert_eq!(e.code.code(), 40415);
    }

    #[test]
    fn privilege_arrays_fail_to_parse_as_mongodb() {
        let arr = |d: RawDocumentBuf| {
            let mut a = RawArrayBuf::new();
            a.push(d);
            a
        };
        let e = parse_privilege_array(&arr(rawdoc! {
            "resource": {"db": "a", "collection": ""}, "actions": ["find", "fly", "swim"]
        }))
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::FailedToParse);
        assert_eq!(e.message, "Unrecognized action privilege strings: fly,swim");
        let e = parse_privilege_array(&arr(rawdoc! {
            "resource": {"db": "a", "collection": ""}, "actions": []
        }))
        .unwrap_err();
        assert_eq!(
            e.message,
            "'actions' field of privilege resource must not be empty"
        );
        let e = parse_privilege_array(&arr(rawdoc! {"actions": ["find"]})).unwrap_err();
        assert_eq!(e.code, ErrorCode::FailedToParse);
        assert_eq!(
            e.message,
            "BSON field 'privilege.resource' is missing but a required field"
        );
        let mut a = RawArrayBuf::new();
        a.push(1);
        let e = parse_privilege_array(&a).unwrap_err();
        assert_eq!(e.message, "Elements in privilege arrays must be objects");
        let p = parse(rawdoc! {"resource": {"cluster": true}, "actions": ["shutdown", "fsync"]})
            .unwrap();
        // Rendered in declaration order, not input order.
        assert_eq!(
            p.to_bson(),
            rawdoc! {"resource": {"cluster": true}, "actions": ["fsync", "shutdown"]}
        );
    }

    #[test]
    fn matching_follows_the_search_list() {
        let mut s = PrivilegeSet::new();
        s.add(&Privilege::new(R::db("test"), &[A::Find]));
        s.add(&Privilege::new(R::AnyNormal, &[A::Insert]));
        s.add(&Privilege::new(
            R::Collection("system.js".into()),
            &[A::Remove],
        ));
        s.add(&Privilege::new(R::Cluster, &[A::Shutdown]));
        assert!(s.allows(&R::ns("test", "c"), A::Find));
        assert!(s.allows(&R::db("test"), A::Find));
        assert!(!s.allows(&R::ns("other", "c"), A::Find));
        assert!(
            !s.allows(&R::ns("test", "system.users"), A::Find),
            "system.* is not normal"
        );
        assert!(s.allows(&R::ns("other", "c"), A::Insert));
        assert!(
            !s.allows(&R::ns("local", "c"), A::Insert),
            "anyNormal skips local"
        );
        assert!(!s.allows(&R::ns("config", "c"), A::Insert));
        assert!(s.allows(&R::ns("x", "system.js"), A::Remove));
        assert!(s.allows(&R::Cluster, A::Shutdown));
        assert!(!s.allows(&R::Cluster, A::Find));
        assert!(s.is_authorized(&R::ns("test", "c"), &ActionSet::of(&[A::Find, A::Insert])));
        assert!(!s.is_authorized(&R::ns("test", "c"), &ActionSet::of(&[A::Find, A::Update])));
        let mut any = PrivilegeSet::new();
        any.add(&Privilege::new(R::Any, &[A::AnyAction]));
        assert!(any.allows(&R::Cluster, A::Shutdown));
        assert!(any.allows(&R::ns("local", "system.replset"), A::Remove));
        let mut b = PrivilegeSet::new();
        b.add(&Privilege::new(R::AnySystemBuckets, &[A::Find]));
        assert!(b.allows(&R::ns("t", "system.buckets.w"), A::Find));
        assert!(!b.allows(&R::ns("t", "w"), A::Find));
    }

    #[test]
    fn covers_agrees_with_the_search_list() {
        let patterns = [
            R::Any,
            R::AnyNormal,
            R::db("a"),
            R::db("local"),
            R::Collection("c".into()),
            R::Collection("system.js".into()),
            R::ns("a", "c"),
            R::ns("local", "c"),
            R::Cluster,
            R::AnySystemBuckets,
            R::AnySystemBucketsInDb("a".into()),
            R::SystemBucketsInAnyDb("w".into()),
            R::SystemBuckets("a".into(), "w".into()),
        ];
        let targets = [
            R::ns("a", "c"),
            R::ns("b", "c"),
            R::ns("a", "system.js"),
            R::ns("a", "system.buckets.w"),
            R::ns("local", "c"),
            R::ns("local", "replset.election"),
            R::ns("config", "c"),
            R::db("a"),
            R::db("local"),
            R::Cluster,
            R::Any,
        ];
        for t in &targets {
            let list = t.search_list();
            for p in &patterns {
                assert_eq!(p.covers(t), list.contains(p), "{p:?} covers {t:?}");
            }
        }
    }

    #[test]
    fn merging_and_any_in_db() {
        let mut s = PrivilegeSet::new();
        s.add(&Privilege::new(R::db("a"), &[A::Find]));
        s.add(&Privilege::new(R::db("a"), &[A::Insert]));
        assert_eq!(s.privileges().len(), 1);
        assert!(s.any_in_db("a") && !s.any_in_db("b"));
        s.add(&Privilege::new(R::ns("b", "c"), &[A::Find]));
        assert!(s.any_in_db("b"));
        s.remove(&Privilege::new(R::ns("b", "c"), &[A::Find]));
        assert!(!s.any_in_db("b"));
    }
}
