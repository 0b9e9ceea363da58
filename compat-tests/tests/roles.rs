//! User-defined roles through the Rust driver (no `--auth` needed): `createRole`,
//! `updateRole`, `dropRole`, `dropAllRolesFromDatabase`, `grant`/`revokePrivilegesToRole`,
//! `grant`/`revokeRolesToRole`, and `rolesInfo` in its forms, with MongoDB's reply shapes
//! and error codes; `connectionStatus` of an unauthenticated connection.

use bson::{Bson, Document, doc};
use cairn_compat_tests::{TestServer, assert_docs, cmd, code_of};
use mongodb::Database;

async fn err(db: &Database, command: Document) -> (i32, String) {
    match db.run_command(command.clone()).await {
        Ok(r) => panic!("{command} succeeded: {r}"),
        Err(e) => {
            let msg = match e.kind.as_ref() {
                mongodb::error::ErrorKind::Command(c) => c.message.clone(),
                _ => e.to_string(),
            };
            (code_of(&e), msg)
        }
    }
}

fn read_actions() -> Bson {
    bson::bson!([
        "changeStream",
        "collStats",
        "dbHash",
        "dbStats",
        "find",
        "killCursors",
        "listCollections",
        "listIndexes",
        "listSearchIndexes",
        "planCacheRead"
    ])
}

fn roles_of(r: &Document) -> Vec<Document> {
    r.get_array("roles")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().clone())
        .collect()
}

#[tokio::test]
async fn create_role_and_roles_info() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("test");
    cmd(
        &db,
        doc! {"createRole": "r1",
              "privileges": [{"resource": {"db": "test", "collection": "c"}, "actions": ["insert", "find"]}],
              "roles": ["read"]},
    )
    .await;

    // The single-name form: the stored document's fields, then the computed ones.
    let r = cmd(&db, doc! {"rolesInfo": "r1"}).await;
    assert_docs(
        &roles_of(&r),
        &[doc! {"_id": "test.r1", "role": "r1", "db": "test",
        "roles": [{"role": "read", "db": "test"}], "isBuiltin": false,
        "inheritedRoles": [{"role": "read", "db": "test"}]}],
    );
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);

    // showPrivileges: own privileges (actions in MongoDB's order) and inherited ones merged
    // per resource.
    let r = cmd(
        &db,
        doc! {"rolesInfo": {"role": "r1", "db": "test"}, "showPrivileges": true},
    )
    .await;
    assert_docs(
        &roles_of(&r),
        &[doc! {"_id": "test.r1", "role": "r1", "db": "test",
        "privileges": [{"resource": {"db": "test", "collection": "c"}, "actions": ["find", "insert"]}],
        "roles": [{"role": "read", "db": "test"}], "isBuiltin": false,
        "inheritedRoles": [{"role": "read", "db": "test"}],
        "inheritedPrivileges": [
            {"resource": {"db": "test", "collection": "c"}, "actions": ["find", "insert"]},
            {"resource": {"db": "test", "collection": ""}, "actions": read_actions()},
            {"resource": {"db": "test", "collection": "system.js"}, "actions": read_actions()},
        ]}],
    );

    // A built-in role: no roles of its own, its privileges flattened.
    let r = cmd(&db, doc! {"rolesInfo": "read", "showPrivileges": true}).await;
    let privileges = bson::bson!([
        {"resource": {"db": "test", "collection": ""}, "actions": read_actions()},
        {"resource": {"db": "test", "collection": "system.js"}, "actions": read_actions()},
    ]);
    assert_docs(
        &roles_of(&r),
        &[
            doc! {"role": "read", "db": "test", "isBuiltin": true, "roles": [], "inheritedRoles": [],
            "privileges": privileges.clone(), "inheritedPrivileges": privileges},
        ],
    );

    // Arrays; missing roles and admin-only roles on another database are left out.
    let r = cmd(
        &db,
        doc! {"rolesInfo": ["r1", {"role": "nope", "db": "test"}, {"role": "root", "db": "test"},
        {"role": "root", "db": "admin"}]},
    )
    .await;
    let names: Vec<_> = roles_of(&r)
        .iter()
        .map(|d| {
            format!(
                "{}@{}",
                d.get_str("role").unwrap(),
                d.get_str("db").unwrap()
            )
        })
        .collect();
    assert_eq!(names, ["r1@test", "root@admin"]);

    // rolesInfo: 1 lists the database's user-defined roles; showBuiltinRoles adds the
    // built-in ones of that database.
    cmd(
        &db,
        doc! {"createRole": "r0", "privileges": [], "roles": []},
    )
    .await;
    let r = cmd(&db, doc! {"rolesInfo": 1}).await;
    let names: Vec<_> = roles_of(&r)
        .iter()
        .map(|d| d.get_str("role").unwrap().to_string())
        .collect();
    assert_eq!(names, ["r0", "r1"]);
    let r = cmd(&db, doc! {"rolesInfo": 1, "showBuiltinRoles": true}).await;
    let names: Vec<_> = roles_of(&r)
        .iter()
        .map(|d| d.get_str("role").unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "dbAdmin",
            "dbOwner",
            "enableSharding",
            "read",
            "readWrite",
            "userAdmin",
            "r0",
            "r1"
        ]
    );
    let admin = client.database("admin");
    let r = cmd(&admin, doc! {"rolesInfo": 1, "showBuiltinRoles": true}).await;
    assert!(
        roles_of(&r)
            .iter()
            .any(|d| d.get_str("role").ok() == Some("root"))
    );
    assert!(
        roles_of(&r)
            .iter()
            .any(|d| d.get_str("role").ok() == Some("clusterMonitor"))
    );

    // showAuthenticationRestrictions and asUserFragment.
    let r = cmd(
        &db,
        doc! {"rolesInfo": "r0", "showAuthenticationRestrictions": true},
    )
    .await;
    assert_docs(
        &roles_of(&r),
        &[
            doc! {"_id": "test.r0", "role": "r0", "db": "test", "roles": [],
            "authenticationRestrictions": [], "isBuiltin": false, "inheritedRoles": [],
            "inheritedAuthenticationRestrictions": []},
        ],
    );
    let mut r = cmd(
        &db,
        doc! {"rolesInfo": ["r1"], "showPrivileges": "asUserFragment"},
    )
    .await;
    r.remove("ok");
    let frag = r.get_document("userFragment").unwrap();
    assert_eq!(
        frag.get_array("inheritedRoles").unwrap(),
        &vec![
            Bson::Document(doc! {"role": "r1", "db": "test"}),
            Bson::Document(doc! {"role": "read", "db": "test"})
        ]
    );

    assert_eq!(
        err(
            &db,
            doc! {"rolesInfo": 1, "showPrivileges": "asUserFragment"}
        )
        .await,
        (
            20,
            "Cannot get user fragment for all roles in a database".into()
        )
    );
    assert_eq!(
        err(&db, doc! {"rolesInfo": 2}).await,
        (2, "RoleName must be either a string or an object".into())
    );

    // The stored document, as MongoDB stores it.
    let stored = client
        .database("admin")
        .collection::<Document>("system.roles")
        .find_one(doc! {"_id": "test.r1"})
        .await
        .unwrap()
        .unwrap();
    assert_docs(
        &[stored],
        &[doc! {"_id": "test.r1", "role": "r1", "db": "test",
        "privileges": [{"resource": {"db": "test", "collection": "c"}, "actions": ["find", "insert"]}],
        "roles": [{"role": "read", "db": "test"}], "authenticationRestrictions": []}],
    );
}

#[tokio::test]
async fn create_role_refusals() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("test");
    let ok = doc! {"privileges": [], "roles": []};
    let with = |name: &str| {
        let mut d = doc! {"createRole": name};
        d.extend(ok.clone());
        d
    };
    cmd(&db, with("r")).await;
    assert_eq!(
        err(&db, with("r")).await,
        (51002, "Role \"r@test\" already exists".into())
    );
    assert_eq!(
        err(&db, with("read")).await,
        (
            2,
            "Cannot create roles with the same name as a built-in role".into()
        )
    );
    assert_eq!(
        err(&db, with("")).await,
        (2, "Role name must be non-empty".into())
    );
    assert_eq!(
        err(&client.database("local"), with("r")).await,
        (2, "Cannot create roles in the local database".into())
    );
    assert_eq!(
        err(&client.database("$external"), with("r")).await,
        (2, "Cannot create roles in the $external database".into())
    );
    assert_eq!(
        err(&db, doc! {"createRole": "x", "roles": []}).await.0,
        40414,
        "privileges is required"
    );
    assert_eq!(
        err(&db, doc! {"createRole": "x", "privileges": []}).await.0,
        40414,
        "roles is required"
    );
    assert_eq!(
        err(&db, doc! {"createRole": "x", "privileges": 1, "roles": []})
            .await
            .0,
        14
    );
    assert_eq!(
        err(
            &db,
            doc! {"createRole": "x", "privileges": [], "roles": [], "bogus": 1}
        )
        .await
        .0,
        40415
    );
    // Privileges: unknown actions and malformed resources fail to parse (9).
    assert_eq!(
        err(
            &db,
            doc! {"createRole": "x", "roles": [],
            "privileges": [{"resource": {"db": "test", "collection": ""}, "actions": ["fly"]}]}
        )
        .await,
        (9, "Unrecognized action privilege strings: fly".into())
    );
    assert_eq!(
        err(
            &db,
            doc! {"createRole": "x", "roles": [],
            "privileges": [{"resource": {"cluster": false}, "actions": ["find"]}]}
        )
        .await,
        (9, "resource: {cluster: false} must be true".into())
    );
    // A role outside admin holds privileges only on its own database.
    assert_eq!(
        err(
            &db,
            doc! {"createRole": "x", "roles": [],
                  "privileges": [{"resource": {"cluster": true}, "actions": ["serverStatus"]}]}
        )
        .await,
        (
            49,
            "Roles on the 'test' database cannot be granted privileges that target other databases or the cluster"
                .into()
        )
    );
    assert_eq!(
        err(
            &db,
            doc! {"createRole": "x", "privileges": [], "roles": [{"role": "read", "db": "other"}]}
        )
        .await,
        (
            49,
            "Roles on the 'test' database cannot be granted roles from other databases".into()
        )
    );
    assert_eq!(
        err(
            &db,
            doc! {"createRole": "x", "privileges": [], "roles": ["nope"]}
        )
        .await,
        (31, "Cannot grant nonexistent role nope@test".into())
    );
    assert_eq!(
        err(
            &db,
            doc! {"createRole": "x", "privileges": [], "roles": [5]}
        )
        .await,
        (2, "RoleName must be either a string or an object".into())
    );
    // An admin role may hold cluster privileges and roles of any database.
    let admin = client.database("admin");
    cmd(
        &admin,
        doc! {"createRole": "ops", "roles": [{"role": "read", "db": "test"}],
        "privileges": [{"resource": {"cluster": true}, "actions": ["serverStatus"]}]},
    )
    .await;
}

#[tokio::test]
async fn update_grant_revoke_and_drop() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("test");
    cmd(&db, doc! {"createRole": "a", "privileges": [], "roles": []}).await;
    cmd(
        &db,
        doc! {"createRole": "b", "privileges": [], "roles": ["a"]},
    )
    .await;

    // Cycles and self-grants are refused.
    assert_eq!(
        err(&db, doc! {"grantRolesToRole": "a", "roles": ["b"]}).await,
        (
            49,
            "Granting b@test to a@test would introduce a cycle in the role graph.".into()
        )
    );
    assert_eq!(
        err(&db, doc! {"grantRolesToRole": "a", "roles": ["a"]}).await,
        (49, "Cannot grant role a@test to itself.".into())
    );
    assert_eq!(
        err(&db, doc! {"updateRole": "a", "roles": ["b"]}).await.0,
        49
    );
    assert_eq!(
        err(&db, doc! {"grantRolesToRole": "a", "roles": []}).await,
        (
            2,
            "grantRolesToRole command requires a non-empty \"roles\" array".into()
        )
    );
    assert_eq!(
        err(&db, doc! {"grantRolesToRole": "zz", "roles": ["read"]}).await,
        (31, "Role zz@test not found".into())
    );
    assert_eq!(
        err(&db, doc! {"grantRolesToRole": "read", "roles": ["a"]}).await,
        (
            49,
            "read@test is a built-in role and cannot be modified.".into()
        )
    );

    // Privileges merge per resource and revoke by action.
    let p =
        |actions: Bson| doc! {"resource": {"db": "test", "collection": "c"}, "actions": actions};
    cmd(
        &db,
        doc! {"grantPrivilegesToRole": "a", "privileges": [p(bson::bson!(["find"]))]},
    )
    .await;
    cmd(
        &db,
        doc! {"grantPrivilegesToRole": "a", "privileges": [p(bson::bson!(["insert", "update"]))]},
    )
    .await;
    cmd(
        &db,
        doc! {"revokePrivilegesFromRole": "a", "privileges": [p(bson::bson!(["update"]))]},
    )
    .await;
    let r = cmd(&db, doc! {"rolesInfo": "a", "showPrivileges": true}).await;
    assert_eq!(
        roles_of(&r)[0].get_array("privileges").unwrap(),
        &vec![Bson::Document(p(bson::bson!(["find", "insert"])))]
    );
    cmd(
        &db,
        doc! {"revokePrivilegesFromRole": "a", "privileges": [p(bson::bson!(["find", "insert"]))]},
    )
    .await;
    let r = cmd(&db, doc! {"rolesInfo": "a", "showPrivileges": true}).await;
    assert!(roles_of(&r)[0].get_array("privileges").unwrap().is_empty());
    assert_eq!(
        err(&db, doc! {"grantPrivilegesToRole": "a", "privileges": []})
            .await
            .0,
        2
    );

    // b inherits a; inherited privileges show through.
    cmd(
        &db,
        doc! {"grantPrivilegesToRole": "a", "privileges": [p(bson::bson!(["remove"]))]},
    )
    .await;
    let r = cmd(&db, doc! {"rolesInfo": "b", "showPrivileges": true}).await;
    assert_eq!(
        roles_of(&r)[0].get_array("inheritedPrivileges").unwrap(),
        &vec![Bson::Document(p(bson::bson!(["remove"])))]
    );

    // updateRole replaces what it names.
    assert_eq!(
        err(&db, doc! {"updateRole": "a"}).await,
        (
            2,
            "Must specify at least one field to update in updateRole".into()
        )
    );
    assert_eq!(
        err(&db, doc! {"updateRole": "zz", "roles": []}).await,
        (31, "Role zz@test not found".into())
    );
    cmd(
        &db,
        doc! {"updateRole": "b", "roles": ["read"], "privileges": []},
    )
    .await;
    let r = cmd(&db, doc! {"rolesInfo": "b"}).await;
    assert_eq!(
        roles_of(&r)[0].get_array("roles").unwrap(),
        &vec![Bson::Document(doc! {"role": "read", "db": "test"})]
    );
    cmd(
        &db,
        doc! {"revokeRolesFromRole": "b", "roles": ["read", "nope"]},
    )
    .await;
    cmd(&db, doc! {"grantRolesToRole": "b", "roles": ["a"]}).await;

    // dropRole pulls the role from the roles that inherit it.
    assert_eq!(
        err(&db, doc! {"dropRole": "zz"}).await,
        (31, "Role zz@test not found".into())
    );
    assert_eq!(err(&db, doc! {"dropRole": "read"}).await.0, 49);
    cmd(&db, doc! {"dropRole": "a"}).await;
    let r = cmd(&db, doc! {"rolesInfo": "b"}).await;
    assert!(roles_of(&r)[0].get_array("roles").unwrap().is_empty());

    // dropAllRolesFromDatabase counts what it dropped, only in its database.
    let other = client.database("other");
    cmd(
        &other,
        doc! {"createRole": "o", "privileges": [], "roles": []},
    )
    .await;
    cmd(&db, doc! {"createRole": "c", "privileges": [], "roles": []}).await;
    let r = cmd(&db, doc! {"dropAllRolesFromDatabase": 1}).await;
    assert_eq!(r.get("n"), Some(&Bson::Int32(2)));
    let r = cmd(&db, doc! {"rolesInfo": 1}).await;
    assert!(roles_of(&r).is_empty());
    let r = cmd(&other, doc! {"rolesInfo": 1}).await;
    assert_eq!(roles_of(&r).len(), 1);
}

#[tokio::test]
async fn connection_status_unauthenticated() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("test");
    let mut r = cmd(&db, doc! {"connectionStatus": 1, "showPrivileges": true}).await;
    r.remove("ok");
    assert_eq!(
        r,
        doc! {"authInfo": {"authenticatedUsers": [], "authenticatedUserRoles": [],
        "authenticatedUserPrivileges": []}}
    );
}
