//! `buildInfo` (alias `buildinfo`): version and build facts.
//!
//! `version` is the MongoDB release whose behaviour Cairn implements (strict `X.Y.Z`, which
//! drivers and tools parse); Cairn's own version and commit are in `cairnVersion` and
//! `gitVersion`. Every other value describes this actual binary (compiler, target, debug).
//! As on mongos, there is no `storageEngines` field.

use bson::{RawArrayBuf, rawdoc};
use cairn_wire::MAX_BSON_OBJECT_SIZE;

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};

/// The MongoDB version Cairn is compatible with.
pub const MONGODB_VERSION: &str = "7.0.0";
/// `versionArray` for [`MONGODB_VERSION`].
pub const VERSION_ARRAY: [i32; 4] = [7, 0, 0, 0];
/// The git commit this binary was built from.
pub const GIT_VERSION: &str = env!("CAIRN_GIT_VERSION");

/// `buildInfo`.
pub static COMMAND: Command = Command {
    name: "buildInfo",
    aliases: &["buildinfo"],
    help: "get version #, etc.\n{ buildinfo:1 }",
    requires_auth: false,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(_inv: Invocation<'_>) -> CmdFuture<'_> {
    let mut version_array = RawArrayBuf::new();
    for v in VERSION_ARRAY {
        version_array.push(v);
    }
    let body = rawdoc! {
        "version": MONGODB_VERSION,
        "gitVersion": GIT_VERSION,
        "modules": [],
        "allocator": "system",
        "javascriptEngine": "none",
        "sysInfo": "deprecated",
        "versionArray": version_array,
        "openssl": {"running": "disabled", "compiled": "disabled"},
        "buildEnvironment": {
            "distmod": "",
            "distarch": env!("CAIRN_BUILD_CARGO_CFG_TARGET_ARCH"),
            "cc": env!("CAIRN_RUSTC_VERSION"),
            "ccflags": "",
            "cxx": "",
            "cxxflags": "",
            "linkflags": "",
            "target_arch": env!("CAIRN_BUILD_CARGO_CFG_TARGET_ARCH"),
            "target_os": env!("CAIRN_BUILD_CARGO_CFG_TARGET_OS"),
            "cppdefines": "",
            "target": env!("CAIRN_BUILD_TARGET"),
            "profile": env!("CAIRN_BUILD_PROFILE"),
        },
        "bits": (usize::BITS as i32),
        "debug": cfg!(debug_assertions),
        "maxBsonObjectSize": (MAX_BSON_OBJECT_SIZE as i32),
        "cairnVersion": env!("CARGO_PKG_VERSION"),
    };
    ready(Ok(body.into()))
}
