//! Tests of the per-command requirements: the registry's declarations, the role table
//! (`role_table.json`), ownership of cursors and sessions, and the refusal message.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use bson::{RawDocumentBuf, rawdoc};
use cairn_storage::engine::memory::MemoryEngine;
use cairn_storage::{Durability, Store, StoreOptions};

use super::*;
use crate::auth::privilege::parse_privilege_array;
use crate::auth::roles::{self, RoleDoc, parse_role_names};
use crate::auth::{RoleName, UserName};
use crate::commands::{REGISTRY, lookup};

fn server() -> Arc<ServerState> {
    let mut config = crate::config::Config::for_tests("/nonexistent-cairn-test".into());
    config.auth = true;
    let store = Arc::new(
        Store::open(
            Arc::new(MemoryEngine::new()),
            StoreOptions { sync_always: false },
        )
        .unwrap(),
    );
    Arc::new(ServerState::new(
        config,
        Vec::new(),
        Arc::new(crate::logging::RamLogs::default()),
        store,
    ))
}

fn add_user(server: &ServerState, user: &UserName, roles: &[RoleName]) {
    let store = &server.store;
    if store.collection("admin", "system.users").is_none() {
        store
            .create_collection("admin", "system.users", &RawDocumentBuf::new())
            .unwrap();
    }
    let meta = store.collection("admin", "system.users").unwrap();
    let id = roles::doc_id(&user.db, &user.user);
    let doc = rawdoc! {"_id": id.as_str(), "user": user.user.as_str(), "db": user.db.as_str(),
    "credentials": {}, "roles": roles::roles_bson(roles)};
    store
        .write(Durability::Buffered, |tx| tx.insert(&meta, &doc))
        .unwrap();
    crate::auth::invalidate(server);
}

fn json_doc(v: &serde_json::Value) -> RawDocumentBuf {
    let b = bson::Bson::try_from(v.clone()).unwrap();
    let bson::Bson::Document(d) = b else {
        panic!("not a document: {v}")
    };
    RawDocumentBuf::try_from(&d).unwrap()
}

fn authz_of(name: &str) -> Authz {
    lookup(name).map(|c| c.authz).unwrap_or_else(|| {
        USER_COMMANDS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| panic!("no command {name}"))
    })
}

fn allowed(server: &ServerState, users: &[UserName], body: &RawDocumentBuf, db: &str) -> bool {
    let authz = UserAuthz::load(&server.store, users).unwrap();
    let ctx = AuthCtx {
        server,
        users,
        authz: &authz,
    };
    let name = body.iter().next().unwrap().unwrap().0.as_str();
    let req = Request {
        name,
        db,
        body,
        exhaust_allowed: false,
    };
    let a = authz_of(name);
    match a {
        Authz::None => true,
        Authz::Ns(x) => ctx.allows(&first_ns(&req), x),
        Authz::Db(x) => ctx.allows(&R::db(db), x),
        Authz::Cluster(x) => ctx.allows(&R::Cluster, x),
        Authz::Custom(f) => f(&ctx, &req).unwrap(),
    }
}

#[test]
fn role_table() {
    let server = server();
    let table: serde_json::Value = serde_json::from_str(include_str!("role_table.json")).unwrap();
    for r in table["userDefinedRoles"].as_array().unwrap() {
        let d = json_doc(r);
        let db = d.get_str("db").unwrap().to_string();
        let name = RoleName {
            role: d.get_str("createRole").unwrap().into(),
            db: db.clone(),
        };
        let privileges = parse_privilege_array(d.get_array("privileges").unwrap()).unwrap();
        let inherits = parse_role_names(d.get_array("roles").unwrap(), &db).unwrap();
        roles::modify_roles(&server, |t| {
            t.catalog.check_grant_roles(&name, &inherits)?;
            roles::check_grant_privileges(&name, &privileges)?;
            let mut role = RoleDoc::new(name.clone());
            role.privileges.add_all(&privileges);
            role.roles = inherits.clone();
            t.put(&role)
        })
        .unwrap();
    }
    let mut failures = Vec::new();
    for (i, case) in table["cases"].as_array().unwrap().iter().enumerate() {
        let user = UserName {
            user: format!("u{i}"),
            db: "admin".into(),
        };
        let roles: Vec<RoleName> = case["roles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| RoleName {
                role: r["role"].as_str().unwrap().into(),
                db: r["db"].as_str().unwrap().into(),
            })
            .collect();
        add_user(&server, &user, &roles);
        let db = case["db"].as_str().unwrap();
        let body = json_doc(&case["cmd"]);
        let want = case["allowed"].as_bool().unwrap();
        if allowed(&server, std::slice::from_ref(&user), &body, db) != want {
            failures.push(format!("{case}"));
        }
    }
    assert!(
        failures.is_empty(),
        "cases that failed:\n{}",
        failures.join("\n")
    );
}

/// Every registered command has a declaration that root satisfies and that refuses a user
/// with no privileges, except the commands that need none; the pre-authentication commands
/// need none.
#[test]
fn registry_declarations() {
    let server = server();
    let root = UserName {
        user: "root".into(),
        db: "admin".into(),
    };
    let nobody = UserName {
        user: "nobody".into(),
        db: "admin".into(),
    };
    add_user(
        &server,
        &root,
        &[RoleName {
            role: "root".into(),
            db: "admin".into(),
        }],
    );
    add_user(&server, &nobody, &[]);
    // Custom checks that let a privilege-less user through for this generic request: it
    // names no foreign cursor or session, no inner command, no parseable rename, or nothing to grant,
    // revoke or change (the command itself then refuses the request, as in MongoDB).
    const FREE_FOR_GENERIC_BODY: &[&str] = &[
        "endSessions",
        "explain",
        "getMore",
        "grantPrivilegesToRole",
        "grantRolesToRole",
        "grantRolesToUser",
        "killCursors",
        "killSessions",
        "refreshSessions",
        "renameCollection",
        "revokePrivilegesFromRole",
        "revokeRolesFromRole",
        "revokeRolesFromUser",
        "updateRole",
        "updateUser",
    ];
    let names: Vec<&str> = REGISTRY
        .iter()
        .map(|c| c.name)
        .chain(USER_COMMANDS.iter().map(|(n, _)| *n))
        .collect();
    for name in names {
        let db = match lookup(name) {
            Some(c) if c.admin_only => "admin",
            _ => "test",
        };
        let mut body = RawDocumentBuf::new();
        body.append(crate::error::key(name).unwrap(), "c");
        if let Some(c) = lookup(name)
            && !c.requires_auth
        {
            assert!(matches!(c.authz, Authz::None), "{name} is pre-auth");
        }
        assert!(
            allowed(&server, std::slice::from_ref(&root), &body, db),
            "root may run {name}"
        );
        let free = matches!(authz_of(name), Authz::None) || FREE_FOR_GENERIC_BODY.contains(&name);
        assert_eq!(
            allowed(&server, std::slice::from_ref(&nobody), &body, db),
            free,
            "a user without privileges and {name}"
        );
    }
}

fn buffered_cursor(server: &ServerState, id: i64) {
    server.cursors.insert(crate::cursor::Cursor {
        id,
        ns: "test.c".into(),
        source: crate::cursor::Source::Buffered(VecDeque::new()),
        remaining: None,
        output: None,
        time_budget: None,
        lsid: None,
        txn_number: None,
        target: Default::default(),
        no_timeout: false,
        last_used: Instant::now(),
    });
}

#[test]
fn cursors_belong_to_their_users() {
    let server = server();
    let alice = UserName {
        user: "alice".into(),
        db: "admin".into(),
    };
    let bob = UserName {
        user: "bob".into(),
        db: "admin".into(),
    };
    let read = RoleName {
        role: "read".into(),
        db: "test".into(),
    };
    add_user(&server, &alice, std::slice::from_ref(&read));
    add_user(&server, &bob, std::slice::from_ref(&read));
    buffered_cursor(&server, 42);
    server.cursors.set_origin(
        42,
        Arc::new(CursorOrigin {
            users: vec![alice.clone()],
            command: lookup("find").unwrap(),
            db: "test".into(),
            body: rawdoc! {"find": "c"},
        }),
    );
    let get_more = rawdoc! {"getMore": 42i64, "collection": "c"};
    assert!(allowed(
        &server,
        std::slice::from_ref(&alice),
        &get_more,
        "test"
    ));
    let authz = UserAuthz::load(&server.store, std::slice::from_ref(&bob)).unwrap();
    let ctx = AuthCtx {
        server: &server,
        users: std::slice::from_ref(&bob),
        authz: &authz,
    };
    let req = Request {
        name: "getMore",
        db: "test",
        body: &get_more,
        exhaust_allowed: false,
    };
    let e = super::get_more(&ctx, &req).unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert_eq!(
        e.message,
        "cursor id 42 was not created by the authenticated user"
    );
    let kill = rawdoc! {"killCursors": "c", "cursors": [42i64]};
    assert!(allowed(
        &server,
        std::slice::from_ref(&alice),
        &kill,
        "test"
    ));
    assert!(!allowed(&server, std::slice::from_ref(&bob), &kill, "test"));
    // Unknown cursors are reported by the command, not refused.
    let kill_unknown = rawdoc! {"killCursors": "c", "cursors": [7i64]};
    assert!(allowed(
        &server,
        std::slice::from_ref(&bob),
        &kill_unknown,
        "test"
    ));
    // hostManager's killAnyCursor kills anyone's.
    let admin = UserName {
        user: "admin".into(),
        db: "admin".into(),
    };
    add_user(
        &server,
        &admin,
        &[RoleName {
            role: "hostManager".into(),
            db: "admin".into(),
        }],
    );
    assert!(allowed(
        &server,
        std::slice::from_ref(&admin),
        &kill,
        "test"
    ));
}

#[test]
fn sessions_belong_to_their_users() {
    let server = server();
    let alice = UserName {
        user: "alice".into(),
        db: "admin".into(),
    };
    let bob = UserName {
        user: "bob".into(),
        db: "admin".into(),
    };
    let lsid = [9u8; 16];
    let body = rawdoc! {"find": "c", "lsid": {"id": bson::Binary {
    subtype: bson::spec::BinarySubtype::Uuid, bytes: lsid.to_vec() }}};
    let authz = UserAuthz::default();
    let ctx = |u: &'static UserName| AuthCtx {
        server: &server,
        users: std::slice::from_ref(u),
        authz: &authz,
    };
    let alice: &'static UserName = Box::leak(Box::new(alice));
    let bob: &'static UserName = Box::leak(Box::new(bob));
    assert!(
        session_owned(&ctx(bob), &body),
        "an unknown session is free"
    );
    let s = server.sessions.get_or_create(lsid);
    s.owner.set(vec![alice.clone()]).unwrap();
    assert!(session_owned(&ctx(alice), &body));
    assert!(!session_owned(&ctx(bob), &body));
    let list = rawdoc! {"endSessions": [{"id": bson::Binary {
    subtype: bson::spec::BinarySubtype::Uuid, bytes: lsid.to_vec() }}]};
    let req = Request {
        name: "endSessions",
        db: "admin",
        body: &list,
        exhaust_allowed: false,
    };
    assert!(own_sessions(&ctx(alice), &req).unwrap());
    assert!(!own_sessions(&ctx(bob), &req).unwrap());
    assert!(
        !kill_sessions(&ctx(bob), &req).unwrap(),
        "bob lacks killAnySession"
    );
}

#[test]
fn refusal_message_shows_the_command_with_the_password_redacted() {
    let body = rawdoc! {"createUser": "x", "pwd": "secret", "roles": [], "$db": "test"};
    let req = Request {
        name: "createUser",
        db: "test",
        body: &body,
        exhaust_allowed: false,
    };
    let e = unauthorized(&req);
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert_eq!(
        e.message,
        "not authorized on test to execute command { createUser: \"x\", pwd: \"xxx\", roles: [], $db: \"test\" }"
    );
}

#[test]
fn aggregate_needs_cover_every_namespace() {
    let body = rawdoc! {"aggregate": "c", "pipeline": [
        {"$lookup": {"from": "l", "as": "x", "pipeline": [{"$unionWith": "u"}]}},
        {"$facet": {"f": [{"$graphLookup": {"from": "g", "startWith": "$a", "connectFromField": "a",
                                             "connectToField": "b", "as": "y"}}]}},
        {"$out": {"db": "o", "coll": "out"}},
    ], "bypassDocumentValidation": true};
    let req = Request {
        name: "aggregate",
        db: "test",
        body: &body,
        exhaust_allowed: false,
    };
    let needs = aggregate_needs(&req);
    let has = |r: R, a: A| needs.iter().any(|(x, s)| *x == r && s.contains(a));
    assert!(has(R::ns("test", "c"), A::Find));
    assert!(has(R::ns("test", "l"), A::Find));
    assert!(has(R::ns("test", "u"), A::Find));
    assert!(has(R::ns("test", "g"), A::Find));
    assert!(has(R::ns("o", "out"), A::Insert));
    assert!(has(R::ns("o", "out"), A::Remove));
    assert!(has(R::ns("o", "out"), A::BypassDocumentValidation));
    // A collectionless `$documents` pipeline needs nothing for its base.
    let body = rawdoc! {"aggregate": 1, "pipeline": [{"$documents": [{}]}]};
    let req = Request {
        name: "aggregate",
        db: "test",
        body: &body,
        exhaust_allowed: false,
    };
    assert!(aggregate_needs(&req).is_empty());
    // A change stream needs changeStream + find, cluster-wide on any normal resource.
    let body =
        rawdoc! {"aggregate": 1, "pipeline": [{"$changeStream": {"allChangesForCluster": true}}]};
    let req = Request {
        name: "aggregate",
        db: "admin",
        body: &body,
        exhaust_allowed: false,
    };
    let needs = aggregate_needs(&req);
    assert_eq!(needs.len(), 1);
    assert_eq!(needs[0].0, R::AnyNormal);
}

/// Cost of the check on the request path (run with `--ignored --nocapture`): the cached
/// resolution plus the privilege match for a `find` and for an `aggregate` with `$lookup`.
#[test]
#[ignore]
fn measure_check_cost() {
    let server = server();
    let user = UserName {
        user: "u".into(),
        db: "admin".into(),
    };
    add_user(
        &server,
        &user,
        &[
            RoleName {
                role: "readWrite".into(),
                db: "test".into(),
            },
            RoleName {
                role: "clusterMonitor".into(),
                db: "admin".into(),
            },
        ],
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let find = rawdoc! {"find": "c", "filter": {"a": 1}, "$db": "test"};
    let agg = rawdoc! {"aggregate": "c", "pipeline": [{"$lookup": {"from": "d", "as": "x",
    "localField": "a", "foreignField": "b"}}, {"$match": {}}], "cursor": {}, "$db": "test"};
    let mut client = crate::client::Client::new(
        1,
        "127.0.0.1:1".parse().unwrap(),
        "127.0.0.1:2".parse().unwrap(),
    );
    client.auth.users.push(user);
    for (name, body) in [("find", &find), ("aggregate", &agg)] {
        let cmd = lookup(name).unwrap();
        let req = Request {
            name,
            db: "test",
            body,
            exhaust_allowed: false,
        };
        const N: u32 = 100_000;
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..N {
                check(&server, &client, cmd, &req).await.unwrap();
            }
        });
        println!("{name}: {:?} per check", t.elapsed() / N);
    }
}

#[test]
fn listing_filters() {
    let server = server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let reader = UserName {
        user: "reader".into(),
        db: "admin".into(),
    };
    let any = UserName {
        user: "any".into(),
        db: "admin".into(),
    };
    add_user(
        &server,
        &reader,
        &[RoleName {
            role: "read".into(),
            db: "test".into(),
        }],
    );
    add_user(
        &server,
        &any,
        &[RoleName {
            role: "readAnyDatabase".into(),
            db: "admin".into(),
        }],
    );
    let client_of = |u: &UserName| {
        let mut c = crate::client::Client::new(
            1,
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        );
        c.auth.users.push(u.clone());
        c
    };
    rt.block_on(async {
        // Without listDatabases on the cluster: filtered to the databases with privileges.
        let f = database_filter(&server, &client_of(&reader), None)
            .await
            .unwrap()
            .expect("filtered");
        assert!(f.privileges.any_in_db("test"));
        assert!(!f.privileges.any_in_db("other"));
        let e = database_filter(&server, &client_of(&reader), Some(false))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Unauthorized);
        assert_eq!(e.message, "Insufficient permissions to list all databases");
        // With it: everything, unless authorizedDatabases: true asks for the filter.
        assert!(
            database_filter(&server, &client_of(&any), None)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            database_filter(&server, &client_of(&any), Some(true))
                .await
                .unwrap()
                .is_some()
        );
        // Unauthenticated (the gate's business) or auth off: no filter.
        let anon = crate::client::Client::new(
            1,
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        );
        assert!(
            database_filter(&server, &anon, None)
                .await
                .unwrap()
                .is_none()
        );
    });
    // A filtered listCollections shows what some privilege matches.
    let a = UserAuthz::load(
        &server.store,
        &[UserName {
            user: "reader".into(),
            db: "admin".into(),
        }],
    )
    .unwrap();
    assert!(may_see_collection(&a, "test", "c"));
    assert!(may_see_collection(&a, "test", "system.js"));
    assert!(!may_see_collection(&a, "test", "system.profile"));
    assert!(!may_see_collection(&a, "other", "c"));
}

/// Through the dispatcher: a refused command never runs, an allowed one does, and a role
/// changed by another connection takes effect on the next command.
#[test]
fn dispatch_enforces_and_sees_role_changes() {
    let server = server();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let admin = UserName {
        user: "admin".into(),
        db: "admin".into(),
    };
    let app = UserName {
        user: "app".into(),
        db: "admin".into(),
    };
    add_user(
        &server,
        &admin,
        &[RoleName {
            role: "root".into(),
            db: "admin".into(),
        }],
    );
    add_user(
        &server,
        &app,
        &[RoleName {
            role: "appRole".into(),
            db: "test".into(),
        }],
    );
    let client_of = |u: &UserName, id: u64| {
        let mut c = crate::client::Client::new(
            id,
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        );
        c.auth.users.push(u.clone());
        c
    };
    let mut root = client_of(&admin, 1);
    let mut user = client_of(&app, 2);
    let code = |r: &RawDocumentBuf| r.get_i32("code").ok();
    rt.block_on(async {
        let run = |c: &mut crate::client::Client, body: RawDocumentBuf| {
            let server = server.clone();
            let mut c2 = c.clone();
            async move {
                let (r, _) = crate::commands::dispatch(&server, &mut c2, &body, false).await;
                r
            }
        };
        let r = run(
            &mut root,
            rawdoc! {"createRole": "appRole", "roles": [],
            "privileges": [{"resource": {"db": "test", "collection": "c"},
                            "actions": ["find", "insert"]}], "$db": "test"},
        )
        .await;
        assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{r:?}");
        let insert = rawdoc! {"insert": "c", "documents": [{"_id": 1}], "$db": "test"};
        let r = run(&mut user, insert.clone()).await;
        assert_eq!(r.get_i32("n").unwrap(), 1, "{r:?}");
        // Not granted: refused before it runs.
        let r = run(
            &mut user,
            rawdoc! {"delete": "c", "deletes": [{"q": {}, "limit": 0}], "$db": "test"},
        )
        .await;
        assert_eq!(code(&r), Some(13), "{r:?}");
        assert_eq!(r.get_str("codeName").unwrap(), "Unauthorized");
        assert!(
            r.get_str("errmsg")
                .unwrap()
                .starts_with("not authorized on test to execute command { delete: \"c\"")
        );
        let r = run(&mut user, rawdoc! {"find": "c", "$db": "test"}).await;
        assert_eq!(r.get_f64("ok").unwrap(), 1.0);
        // Revoked by another connection: the next command sees it.
        let r = run(
            &mut root,
            rawdoc! {"revokePrivilegesFromRole": "appRole",
            "privileges": [{"resource": {"db": "test", "collection": "c"}, "actions": ["insert"]}],
            "$db": "test"},
        )
        .await;
        assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{r:?}");
        let r = run(
            &mut user,
            rawdoc! {"insert": "c", "documents": [{"_id": 2}], "$db": "test"},
        )
        .await;
        assert_eq!(code(&r), Some(13), "{r:?}");
        let r = run(&mut user, rawdoc! {"count": "c", "$db": "test"}).await;
        assert_eq!(
            r.get_i32("n").unwrap(),
            1,
            "the refused insert wrote nothing: {r:?}"
        );
        // connectionStatus shows the user, the role and its privileges.
        let r = run(
            &mut user,
            rawdoc! {"connectionStatus": 1, "showPrivileges": true, "$db": "test"},
        )
        .await;
        let info = r.get_document("authInfo").unwrap();
        assert_eq!(
            info.to_owned(),
            rawdoc! {
                "authenticatedUsers": [{"user": "app", "db": "admin"}],
                "authenticatedUserRoles": [{"role": "appRole", "db": "test"}],
                "authenticatedUserPrivileges": [
                    {"resource": {"db": "test", "collection": "c"}, "actions": ["find"]}
                ],
            }
        );
        // A cursor: only its owner may continue it, and only while the find is allowed.
        let r = run(
            &mut root,
            rawdoc! {"insert": "c", "documents": [{"_id": 10}, {"_id": 11}, {"_id": 12}],
            "$db": "test"},
        )
        .await;
        assert_eq!(r.get_i32("n").unwrap(), 3, "{r:?}");
        let r = run(
            &mut user,
            rawdoc! {"find": "c", "batchSize": 1, "$db": "test"},
        )
        .await;
        let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
        assert_ne!(id, 0);
        let get_more = rawdoc! {"getMore": id, "collection": "c", "batchSize": 1, "$db": "test"};
        let r = run(&mut root, get_more.clone()).await;
        assert_eq!(code(&r), Some(13), "{r:?}");
        assert_eq!(
            r.get_str("errmsg").unwrap(),
            format!("cursor id {id} was not created by the authenticated user")
        );
        let r = run(&mut user, get_more.clone()).await;
        assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{r:?}");
        // Dropping the role removes it from its holders.
        let r = run(&mut root, rawdoc! {"dropRole": "appRole", "$db": "test"}).await;
        assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{r:?}");
        let r = run(&mut user, rawdoc! {"find": "c", "$db": "test"}).await;
        assert_eq!(code(&r), Some(13), "{r:?}");
        let stored = roles::user_roles(&server.store, &app).unwrap().unwrap();
        assert!(stored.is_empty(), "{stored:?}");
        let r = run(&mut user, get_more).await;
        assert_eq!(code(&r), Some(13), "{r:?}");
        assert_eq!(
            r.get_str("errmsg").unwrap(),
            format!("not authorized for getMore with cursor id {id}")
        );
        // A session belongs to the user that first used it.
        let lsid = rawdoc! {"id": bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![3; 16] }};
        let r = run(
            &mut root,
            rawdoc! {"find": "c", "lsid": lsid.clone(), "$db": "test"},
        )
        .await;
        assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{r:?}");
        let r = run(
            &mut user,
            rawdoc! {"ping": 1, "lsid": lsid.clone(), "$db": "test"},
        )
        .await;
        assert_eq!(code(&r), Some(13), "{r:?}");
        let r = run(&mut root, rawdoc! {"ping": 1, "lsid": lsid, "$db": "test"}).await;
        assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{r:?}");
    });
}
