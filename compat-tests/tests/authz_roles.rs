//! Authorization end to end: the role table (`src/auth/authorize/role_table.json`, also run by
//! the unit tests against the dispatcher) through real logins. For every distinct set of roles
//! in the table a user is created on `admin`; each case runs its command as that user over a
//! SCRAM-authenticated connection and must be refused with Unauthorized (13) exactly when the
//! table says so (an allowed command may still fail for other reasons, e.g. a missing role).

use std::collections::BTreeMap;

use bson::{Bson, Document, doc};
use cairn_compat_tests::TestServer;

const ROOT: &str = "root";
const ROOT_PWD: &str = "r00t-pass";
const TABLE: &str = include_str!("../../src/auth/authorize/role_table.json");

fn to_doc(v: &serde_json::Value) -> Document {
    match Bson::try_from(v.clone()).expect("bson") {
        Bson::Document(d) => d,
        other => panic!("not a document: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_role_table_holds_through_real_logins() {
    let table: serde_json::Value = serde_json::from_str(TABLE).expect("json");
    let s = TestServer::start_with_env(
        &["--auth"],
        &[
            ("CAIRN_INITDB_ROOT_USERNAME", ROOT),
            ("CAIRN_INITDB_ROOT_PASSWORD", ROOT_PWD),
        ],
    );
    let root = s.login(ROOT, ROOT_PWD, "").await;
    for r in table["userDefinedRoles"].as_array().expect("roles") {
        let mut cmd = to_doc(r);
        let db = cmd
            .remove("db")
            .and_then(|d| d.as_str().map(str::to_string));
        root.database(db.as_deref().expect("db"))
            .run_command(cmd)
            .await
            .expect("createRole");
    }
    root.database("test")
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 1, "a": 1})
        .await
        .expect("seed");

    // One user per distinct role set.
    let cases = table["cases"].as_array().expect("cases");
    let mut users: BTreeMap<String, (String, mongodb::Client)> = BTreeMap::new();
    for case in cases {
        let key = case["roles"].to_string();
        if users.contains_key(&key) {
            continue;
        }
        let name = format!("u{}", users.len());
        let roles = Bson::try_from(case["roles"].clone()).expect("roles");
        root.database("admin")
            .run_command(doc! {"createUser": &name, "pwd": "pw", "roles": roles})
            .await
            .expect("createUser");
        let client = s.login(&name, "pw", "").await;
        users.insert(key, (name, client));
    }

    let mut wrong = Vec::new();
    for case in cases {
        let (name, client) = &users[&case["roles"].to_string()];
        let db = case["db"].as_str().expect("db");
        let cmd = to_doc(&case["cmd"]);
        let allowed = case["allowed"].as_bool().expect("allowed");
        let code = match client.database(db).run_command(cmd.clone()).await {
            Ok(_) => None,
            Err(e) => match *e.kind {
                mongodb::error::ErrorKind::Command(ref c) => Some(c.code),
                _ => panic!("{name} {db} {cmd}: {e}"),
            },
        };
        if allowed == (code == Some(13)) {
            wrong.push(format!(
                "{name} {} on {db}: {cmd} -> {code:?}, expected {}",
                case["roles"],
                if allowed { "allowed" } else { "13" }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
