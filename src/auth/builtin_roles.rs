//! MongoDB's built-in roles and the privileges each grants (MongoDB 7.0's
//! `builtin_roles.yml` table, written as data).
//!
//! Map: [`BUILTIN_ROLES`] lists every built-in role with whether it exists only on `admin`,
//! its own grants and the built-in roles it includes; [`privileges`] flattens a role (with
//! what it includes) into a [`PrivilegeSet`] for a given database, as MongoDB does — a
//! built-in role reports no subordinate roles, only the flattened privileges.
//!
//! Invariants: built-in roles are never stored; `read@foo` exists for every database `foo`
//! and the admin-only roles exist only as `role@admin`; the table is sorted by name.

use super::privilege::{ActionType as A, Privilege, PrivilegeSet, ResourcePattern as R};

/// Which resources a grant covers.
#[derive(Debug, Clone, Copy)]
enum On {
    /// The role's own database.
    OwnDb,
    /// A named database.
    Db(&'static str),
    /// A collection in the role's own database.
    OwnNs(&'static str),
    /// One namespace.
    Ns(&'static str, &'static str),
    /// A collection name in any database.
    Coll(&'static str),
    /// Any normal resource.
    AnyNormal,
    /// Every time-series buckets collection.
    AnyBuckets,
    /// The cluster.
    Cluster,
    /// Any resource.
    Any,
}

/// One grant: actions (the concatenation of the lists) on a resource.
struct Grant(On, &'static [&'static [A]]);

/// A built-in role.
pub struct BuiltinRole {
    /// The role name.
    pub name: &'static str,
    /// Whether the role exists only on `admin`.
    pub admin_only: bool,
    grants: &'static [Grant],
    /// Included built-in roles: `(name, db)`, `None` meaning the role's own database.
    includes: &'static [(&'static str, Option<&'static str>)],
}

const READ: &[A] = &[
    A::ChangeStream,
    A::CollStats,
    A::DbHash,
    A::DbStats,
    A::Find,
    A::KillCursors,
    A::ListCollections,
    A::ListIndexes,
    A::ListSearchIndexes,
    A::PlanCacheRead,
];

const READ_WRITE: &[A] = &[
    A::CleanupStructuredEncryptionData,
    A::CompactStructuredEncryptionData,
    A::ConvertToCapped,
    A::CreateCollection,
    A::CreateIndex,
    A::CreateSearchIndexes,
    A::DropCollection,
    A::DropIndex,
    A::DropSearchIndex,
    A::Insert,
    A::Remove,
    A::RenameCollectionSameDB,
    A::Update,
    A::UpdateSearchIndex,
];

const USER_ADMIN: &[A] = &[
    A::ChangeCustomData,
    A::ChangePassword,
    A::CreateUser,
    A::CreateRole,
    A::DropUser,
    A::DropRole,
    A::GrantRole,
    A::RevokeRole,
    A::SetAuthenticationRestriction,
    A::ViewUser,
    A::ViewRole,
];

const DB_ADMIN: &[A] = &[
    A::Analyze,
    A::BypassDocumentValidation,
    A::CollMod,
    A::CollStats,
    A::Compact,
    A::ConvertToCapped,
    A::CreateCollection,
    A::DbStats,
    A::DropCollection,
    A::DropDatabase,
    A::DropIndex,
    A::DropSearchIndex,
    A::CreateIndex,
    A::CreateSearchIndexes,
    A::EnableProfiler,
    A::ListCollections,
    A::ListIndexes,
    A::ListSearchIndexes,
    A::UpdateSearchIndex,
    A::PlanCacheIndexFilter,
    A::PlanCacheRead,
    A::PlanCacheWrite,
    A::ReIndex,
    A::RenameCollectionSameDB,
    A::StorageDetails,
    A::Validate,
    A::ConfigureQueryAnalyzer,
];

const PROFILE_EXTRA: &[A] = &[A::ConvertToCapped, A::CreateCollection, A::DropCollection];
const INDEX_ACTIONS: &[A] = &[
    A::CreateIndex,
    A::CreateSearchIndexes,
    A::DropIndex,
    A::DropSearchIndex,
];
const FIND: &[A] = &[A::Find];

const CLUSTER_MONITOR_CLUSTER: &[A] = &[
    A::ConnPoolStats,
    A::GetCmdLineOpts,
    A::GetDefaultRWConcern,
    A::GetLog,
    A::GetParameter,
    A::GetShardMap,
    A::HostInfo,
    A::ListDatabases,
    A::ListSampledQueries,
    A::ListSessions,
    A::ListShards,
    A::Netstat,
    A::OperationMetrics,
    A::ReplSetGetConfig,
    A::ReplSetGetStatus,
    A::ServerStatus,
    A::Top,
    A::UseUuid,
    A::Inprog,
    A::ShardingState,
    A::AllCollectionStats,
    A::ShardedDataDistribution,
];
const CLUSTER_MONITOR_DB: &[A] = &[
    A::CollStats,
    A::DbStats,
    A::GetDatabaseVersion,
    A::GetShardVersion,
    A::IndexStats,
];

const HOST_MANAGER_CLUSTER: &[A] = &[
    A::ApplicationMessage,
    A::AuditConfigure,
    A::ConnPoolSync,
    A::DropConnections,
    A::LogRotate,
    A::OidReset,
    A::SetParameter,
    A::Shutdown,
    A::Touch,
    A::Unlock,
    A::FlushRouterConfig,
    A::Fsync,
    A::InvalidateUserCache,
    A::KillAnyCursor,
    A::KillAnySession,
    A::Killop,
    A::ReplSetResizeOplog,
    A::Resync,
    A::TrafficRecord,
    A::RotateCertificates,
    A::OidcListKeys,
    A::OidcRefreshKeys,
];

const CLUSTER_MANAGER_CLUSTER: &[A] = &[
    A::AppendOplogNote,
    A::ApplicationMessage,
    A::ReplSetConfigure,
    A::ReplSetGetConfig,
    A::ReplSetGetStatus,
    A::ReplSetStateChange,
    A::Resync,
    A::AddShard,
    A::RemoveShard,
    A::ListSessions,
    A::ListShards,
    A::FlushRouterConfig,
    A::CleanupOrphaned,
    A::GetDefaultRWConcern,
    A::RunTenantMigration,
    A::SetDefaultRWConcern,
    A::SetFeatureCompatibilityVersion,
    A::SetClusterParameter,
    A::GetClusterParameter,
    A::SetChangeStreamState,
    A::GetChangeStreamState,
    A::CheckMetadataConsistency,
    A::TransitionToDedicatedConfigServer,
];
const CLUSTER_MANAGER_DB: &[A] = &[
    A::AnalyzeShardKey,
    A::ConfigureQueryAnalyzer,
    A::ClearJumboFlag,
    A::SplitChunk,
    A::MoveChunk,
    A::EnableSharding,
    A::SplitVector,
    A::RefineCollectionShardKey,
    A::ReshardCollection,
];
const WRITES: &[A] = &[A::Insert, A::Update, A::Remove];

const RESTORE_WRITES: &[A] = &[
    A::BypassDocumentValidation,
    A::CollMod,
    A::ConvertToCapped,
    A::CreateCollection,
    A::CreateIndex,
    A::CreateSearchIndexes,
    A::DropCollection,
    A::Insert,
    A::UpdateSearchIndex,
];

/// Every built-in role, sorted by name.
pub static BUILTIN_ROLES: &[BuiltinRole] = &[
    BuiltinRole {
        name: "__queryableBackup",
        admin_only: true,
        grants: &[
            Grant(
                On::Any,
                &[&[
                    A::CollStats,
                    A::ListCollections,
                    A::ListIndexes,
                    A::ListSearchIndexes,
                ]],
            ),
            Grant(On::AnyNormal, &[FIND]),
            Grant(On::AnyBuckets, &[FIND]),
            Grant(
                On::Cluster,
                &[&[A::GetParameter, A::ListDatabases, A::UseUuid]],
            ),
            Grant(On::Db("config"), &[FIND]),
            Grant(On::Db("local"), &[FIND]),
            Grant(On::Ns("local", "replset.election"), &[FIND]),
            Grant(On::Ns("local", "replset.minvalid"), &[FIND]),
            Grant(On::Coll("system.js"), &[FIND]),
            Grant(On::Coll("system.users"), &[FIND]),
            Grant(On::Coll("system.profile"), &[FIND]),
            Grant(On::Ns("admin", "system.backup_users"), &[FIND]),
            Grant(On::Ns("admin", "system.roles"), &[FIND]),
            Grant(On::Ns("admin", "system.version"), &[FIND]),
            Grant(On::Ns("config", "settings"), &[FIND]),
        ],
        includes: &[],
    },
    BuiltinRole {
        name: "__system",
        admin_only: true,
        grants: &[Grant(On::Any, &[&[A::AnyAction]])],
        includes: &[],
    },
    BuiltinRole {
        name: "backup",
        admin_only: true,
        grants: &[
            Grant(
                On::Cluster,
                &[&[
                    A::AppendOplogNote,
                    A::ServerStatus,
                    A::SetUserWriteBlockMode,
                ]],
            ),
            Grant(On::Ns("config", "settings"), &[&[A::Insert, A::Update]]),
        ],
        includes: &[("__queryableBackup", None)],
    },
    BuiltinRole {
        name: "clusterAdmin",
        admin_only: true,
        grants: &[
            Grant(On::AnyNormal, &[&[A::DropDatabase]]),
            Grant(On::Any, &[&[A::ImportCollection, A::ExportCollection]]),
        ],
        includes: &[
            ("clusterMonitor", None),
            ("hostManager", None),
            ("clusterManager", None),
        ],
    },
    BuiltinRole {
        name: "clusterManager",
        admin_only: true,
        grants: &[
            Grant(On::Cluster, &[CLUSTER_MANAGER_CLUSTER]),
            Grant(On::AnyNormal, &[CLUSTER_MANAGER_DB]),
            Grant(On::AnyBuckets, &[CLUSTER_MANAGER_DB]),
            Grant(On::Db("config"), &[CLUSTER_MANAGER_DB]),
            Grant(On::Db("local"), &[CLUSTER_MANAGER_DB]),
            Grant(On::Ns("local", "system.replset"), &[READ]),
            Grant(On::Any, &[&[A::DbCheck]]),
            Grant(On::Ns("local", "system.healthlog"), &[READ]),
            Grant(On::Db("config"), &[WRITES]),
            Grant(On::Db("local"), &[WRITES]),
            Grant(On::Ns("local", "replset.election"), &[WRITES]),
            Grant(On::Ns("local", "replset.minvalid"), &[WRITES]),
        ],
        includes: &[("read", Some("config"))],
    },
    BuiltinRole {
        name: "clusterMonitor",
        admin_only: true,
        grants: &[
            Grant(On::Cluster, &[CLUSTER_MONITOR_CLUSTER]),
            Grant(On::AnyNormal, &[CLUSTER_MONITOR_DB]),
            Grant(On::Db("config"), &[CLUSTER_MONITOR_DB]),
            Grant(On::Ns("config", "system.sessions"), &[CLUSTER_MONITOR_DB]),
            Grant(On::Db("local"), &[CLUSTER_MONITOR_DB]),
            Grant(On::Ns("local", "system.replset"), &[FIND]),
            Grant(On::Ns("local", "replset.election"), &[FIND]),
            Grant(On::Ns("local", "replset.minvalid"), &[FIND]),
            Grant(On::Coll("system.profile"), &[FIND]),
        ],
        includes: &[("read", Some("config")), ("read", Some("local"))],
    },
    BuiltinRole {
        name: "dbAdmin",
        admin_only: false,
        grants: &[
            Grant(On::OwnDb, &[DB_ADMIN]),
            Grant(On::OwnNs("system.profile"), &[READ, PROFILE_EXTRA]),
        ],
        includes: &[],
    },
    BuiltinRole {
        name: "dbAdminAnyDatabase",
        admin_only: true,
        grants: &[
            Grant(On::Cluster, &[&[A::ListDatabases, A::ApplyOps]]),
            Grant(On::AnyNormal, &[DB_ADMIN]),
            Grant(On::Coll("system.profile"), &[READ, PROFILE_EXTRA]),
            Grant(On::AnyBuckets, &[DB_ADMIN]),
        ],
        includes: &[],
    },
    BuiltinRole {
        name: "dbOwner",
        admin_only: false,
        grants: &[],
        includes: &[("readWrite", None), ("dbAdmin", None), ("userAdmin", None)],
    },
    BuiltinRole {
        name: "directShardOperations",
        admin_only: true,
        grants: &[],
        includes: &[],
    },
    BuiltinRole {
        name: "enableSharding",
        admin_only: false,
        grants: &[Grant(
            On::AnyNormal,
            &[&[
                A::AnalyzeShardKey,
                A::EnableSharding,
                A::RefineCollectionShardKey,
                A::ReshardCollection,
            ]],
        )],
        includes: &[],
    },
    BuiltinRole {
        name: "hostManager",
        admin_only: true,
        grants: &[
            Grant(On::Cluster, &[HOST_MANAGER_CLUSTER]),
            Grant(On::AnyNormal, &[&[A::KillCursors]]),
        ],
        includes: &[],
    },
    BuiltinRole {
        name: "read",
        admin_only: false,
        grants: &[
            Grant(On::OwnDb, &[READ]),
            Grant(On::OwnNs("system.js"), &[READ]),
        ],
        includes: &[],
    },
    BuiltinRole {
        name: "readAnyDatabase",
        admin_only: true,
        grants: &[
            Grant(On::AnyNormal, &[READ]),
            Grant(On::Cluster, &[&[A::ListDatabases]]),
            Grant(On::Coll("system.js"), &[READ]),
            Grant(On::AnyBuckets, &[READ]),
        ],
        includes: &[],
    },
    BuiltinRole {
        name: "readWrite",
        admin_only: false,
        grants: &[
            Grant(On::OwnDb, &[READ, READ_WRITE]),
            Grant(On::OwnNs("system.js"), &[READ, READ_WRITE]),
        ],
        includes: &[],
    },
    BuiltinRole {
        name: "readWriteAnyDatabase",
        admin_only: true,
        grants: &[
            Grant(On::AnyNormal, &[READ, READ_WRITE]),
            Grant(On::Coll("system.js"), &[READ, READ_WRITE]),
            Grant(On::AnyBuckets, &[READ, READ_WRITE]),
        ],
        includes: &[("readAnyDatabase", None)],
    },
    BuiltinRole {
        name: "restore",
        admin_only: true,
        grants: &[
            Grant(
                On::Cluster,
                &[&[
                    A::GetParameter,
                    A::ForceUuid,
                    A::UseUuid,
                    A::BypassWriteBlockingMode,
                    A::SetUserWriteBlockMode,
                    A::ApplyOps,
                ]],
            ),
            Grant(On::Db("local"), &[RESTORE_WRITES]),
            Grant(On::Db("config"), &[RESTORE_WRITES]),
            Grant(On::AnyBuckets, &[RESTORE_WRITES]),
            Grant(On::Ns("local", "system.replset"), &[RESTORE_WRITES]),
            Grant(On::Ns("local", "replset.election"), &[RESTORE_WRITES]),
            Grant(On::Ns("local", "replset.minvalid"), &[RESTORE_WRITES]),
            Grant(On::Any, &[&[A::ListCollections]]),
            Grant(On::AnyNormal, &[RESTORE_WRITES, USER_ADMIN]),
            Grant(On::Coll("system.js"), &[RESTORE_WRITES]),
            Grant(On::Ns("admin", "tempusers"), &[FIND]),
            Grant(On::Ns("admin", "temproles"), &[FIND]),
            Grant(On::Ns("admin", "system.backup_users"), &[RESTORE_WRITES]),
            Grant(On::Ns("admin", "system.version"), &[RESTORE_WRITES, FIND]),
            Grant(
                On::Coll("system.users"),
                &[RESTORE_WRITES, &[A::Find, A::Update, A::Remove]],
            ),
            Grant(On::Ns("admin", "system.roles"), &[&[A::CreateIndex]]),
        ],
        includes: &[],
    },
    BuiltinRole {
        name: "root",
        admin_only: true,
        grants: &[
            Grant(On::Any, &[&[A::Validate]]),
            Grant(On::Cluster, &[&[A::UseTenant]]),
            Grant(
                On::Ns("config", "system.preimages"),
                &[&[A::Find, A::Remove]],
            ),
            Grant(
                On::Ns("config", "system.change_collection"),
                &[&[A::Find, A::Insert, A::Remove, A::Update]],
            ),
        ],
        includes: &[
            ("clusterAdmin", None),
            ("userAdminAnyDatabase", None),
            ("dbAdminAnyDatabase", None),
            ("readWriteAnyDatabase", None),
            ("backup", None),
            ("restore", None),
            ("directShardOperations", None),
        ],
    },
    BuiltinRole {
        name: "userAdmin",
        admin_only: false,
        grants: &[Grant(On::OwnDb, &[USER_ADMIN])],
        includes: &[],
    },
    BuiltinRole {
        name: "userAdminAnyDatabase",
        admin_only: true,
        grants: &[
            Grant(On::AnyNormal, &[USER_ADMIN, &[A::ListCachedAndActiveUsers]]),
            Grant(On::Db("local"), &[USER_ADMIN]),
            Grant(On::Db("config"), &[USER_ADMIN]),
            Grant(
                On::Cluster,
                &[&[
                    A::ListDatabases,
                    A::AuthSchemaUpgrade,
                    A::InvalidateUserCache,
                    A::ViewUser,
                ]],
            ),
            Grant(On::Ns("admin", "system.users"), &[READ, INDEX_ACTIONS]),
            Grant(On::Ns("admin", "system.roles"), &[READ, INDEX_ACTIONS]),
            Grant(On::Coll("system.users"), &[READ]),
            Grant(On::Ns("admin", "system.version"), &[READ]),
            Grant(On::Ns("admin", "system.backup_users"), &[READ]),
        ],
        includes: &[],
    },
];

fn find(name: &str) -> Option<&'static BuiltinRole> {
    BUILTIN_ROLES
        .binary_search_by(|r| r.name.cmp(name))
        .ok()
        .map(|i| &BUILTIN_ROLES[i])
}

/// The built-in role `name@db`, if it exists (admin-only roles exist only on `admin`).
pub fn get(name: &str, db: &str) -> Option<&'static BuiltinRole> {
    if db.is_empty() || db == "$external" {
        // No built-in role lives on `$external` (its users are defined elsewhere).
        return None;
    }
    find(name).filter(|r| !r.admin_only || db == "admin")
}

/// Whether `name` is a built-in role's name on any database (user-defined roles may not
/// take these names).
pub fn is_builtin_name(name: &str) -> bool {
    find(name).is_some()
}

/// The built-in roles that exist on `db`, sorted by name.
pub fn roles_on(db: &str) -> impl Iterator<Item = &'static BuiltinRole> + '_ {
    BUILTIN_ROLES
        .iter()
        .filter(move |r| !r.admin_only || db == "admin")
}

/// Every privilege of built-in role `name@db` (its own grants and those of the roles it
/// includes), or `None` when no such built-in role exists.
pub fn privileges(name: &str, db: &str) -> Option<PrivilegeSet> {
    let role = get(name, db)?;
    let mut out = PrivilegeSet::new();
    add_privileges(role, db, &mut out);
    Some(out)
}

fn add_privileges(role: &BuiltinRole, db: &str, out: &mut PrivilegeSet) {
    for Grant(on, lists) in role.grants {
        let resource = match *on {
            On::OwnDb => R::db(db),
            On::Db(d) => R::db(d),
            On::OwnNs(c) => R::ns(db, c),
            On::Ns(d, c) => R::ns(d, c),
            On::Coll(c) => R::Collection(c.to_string()),
            On::AnyNormal => R::AnyNormal,
            On::AnyBuckets => R::AnySystemBuckets,
            On::Cluster => R::Cluster,
            On::Any => R::Any,
        };
        let actions: Vec<A> = lists.iter().flat_map(|l| l.iter().copied()).collect();
        out.add(&Privilege::new(resource, &actions));
    }
    for (name, sub_db) in role.includes {
        let sub_db = sub_db.unwrap_or(db);
        if let Some(sub) = get(name, sub_db) {
            add_privileges(sub, sub_db, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_includes_exist() {
        let names: Vec<_> = BUILTIN_ROLES.iter().map(|r| r.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        for r in BUILTIN_ROLES {
            for (name, db) in r.includes {
                let db = db.unwrap_or(if r.admin_only { "admin" } else { "test" });
                assert!(get(name, db).is_some(), "{} includes {name}@{db}", r.name);
            }
        }
    }

    #[test]
    fn admin_only_roles_exist_only_on_admin() {
        assert!(get("read", "foo").is_some());
        assert!(get("root", "foo").is_none());
        assert!(get("root", "admin").is_some());
        assert!(get("nope", "admin").is_none());
        assert!(is_builtin_name("root"));
        let on_test: Vec<_> = roles_on("test").map(|r| r.name).collect();
        assert_eq!(
            on_test,
            [
                "dbAdmin",
                "dbOwner",
                "enableSharding",
                "read",
                "readWrite",
                "userAdmin"
            ]
        );
    }

    /// One allowed and one denied action per role: the role table as MongoDB documents it.
    #[test]
    fn each_role_allows_and_denies_as_mongodb() {
        use crate::auth::privilege::ActionType::*;
        let ns = |d: &str, c: &str| R::ns(d, c);
        #[allow(clippy::type_complexity)]
        let cases: &[(&str, &str, R, crate::auth::privilege::ActionType, bool)] = &[
            ("read", "test", ns("test", "c"), Find, true),
            ("read", "test", ns("test", "c"), Insert, false),
            ("read", "test", ns("other", "c"), Find, false),
            ("read", "test", ns("test", "system.js"), Find, true),
            ("readWrite", "test", ns("test", "c"), Insert, true),
            ("readWrite", "test", R::db("test"), DropDatabase, false),
            ("dbAdmin", "test", R::db("test"), DropDatabase, true),
            ("dbAdmin", "test", ns("test", "c"), Find, false),
            ("dbAdmin", "test", ns("test", "system.profile"), Find, true),
            ("userAdmin", "test", R::db("test"), CreateUser, true),
            ("userAdmin", "test", ns("test", "c"), Find, false),
            ("dbOwner", "test", ns("test", "c"), Insert, true),
            ("dbOwner", "test", R::db("test"), CreateRole, true),
            ("dbOwner", "test", R::Cluster, ListDatabases, false),
            ("readAnyDatabase", "admin", ns("x", "c"), Find, true),
            ("readAnyDatabase", "admin", ns("x", "c"), Insert, false),
            ("readAnyDatabase", "admin", R::Cluster, ListDatabases, true),
            ("readAnyDatabase", "admin", ns("local", "c"), Find, false),
            ("readWriteAnyDatabase", "admin", ns("x", "c"), Update, true),
            (
                "readWriteAnyDatabase",
                "admin",
                R::db("x"),
                DropDatabase,
                false,
            ),
            ("userAdminAnyDatabase", "admin", R::db("x"), GrantRole, true),
            ("userAdminAnyDatabase", "admin", ns("x", "c"), Find, false),
            (
                "dbAdminAnyDatabase",
                "admin",
                R::db("x"),
                DropDatabase,
                true,
            ),
            ("dbAdminAnyDatabase", "admin", ns("x", "c"), Insert, false),
            ("clusterMonitor", "admin", R::Cluster, ServerStatus, true),
            ("clusterMonitor", "admin", R::Cluster, Shutdown, false),
            ("clusterMonitor", "admin", ns("config", "c"), Find, true),
            ("hostManager", "admin", R::Cluster, Shutdown, true),
            ("hostManager", "admin", R::Cluster, ServerStatus, false),
            (
                "clusterManager",
                "admin",
                R::Cluster,
                SetFeatureCompatibilityVersion,
                true,
            ),
            ("clusterManager", "admin", ns("x", "c"), Find, false),
            ("clusterAdmin", "admin", R::db("x"), DropDatabase, true),
            ("clusterAdmin", "admin", R::Cluster, Inprog, true),
            ("clusterAdmin", "admin", ns("x", "c"), Insert, false),
            ("backup", "admin", ns("x", "c"), Find, true),
            ("backup", "admin", ns("x", "c"), Insert, false),
            ("restore", "admin", ns("x", "c"), Insert, true),
            ("restore", "admin", ns("x", "c"), Find, false),
            ("root", "admin", ns("x", "c"), Insert, true),
            ("root", "admin", R::Cluster, Shutdown, true),
            ("root", "admin", R::db("x"), CreateUser, true),
            ("root", "admin", ns("local", "oplog.rs"), Insert, true),
            (
                "root",
                "admin",
                ns("local", "system.replset"),
                Remove,
                false,
            ),
            (
                "__system",
                "admin",
                ns("local", "system.replset"),
                Remove,
                true,
            ),
        ];
        for (role, db, target, action, want) in cases {
            let p = privileges(role, db).unwrap();
            assert_eq!(
                p.allows(target, *action),
                *want,
                "{role}@{db} {target:?} {action:?}"
            );
        }
    }
}
