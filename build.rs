//! Records build facts for `buildInfo`: the git commit, the compiler and the target.
//! Outside a git checkout (e.g. a container build from a source archive) the commit comes
//! from `CAIRN_GIT_VERSION`, or is reported as "unknown".

use std::process::Command;

fn run(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let git = std::env::var("CAIRN_GIT_VERSION")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| run("git", &["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = run(&rustc, &["--version"]).unwrap_or_else(|| "rustc".into());
    println!("cargo:rustc-env=CAIRN_GIT_VERSION={git}");
    println!("cargo:rustc-env=CAIRN_RUSTC_VERSION={rustc_version}");
    for var in [
        "TARGET",
        "PROFILE",
        "CARGO_CFG_TARGET_ARCH",
        "CARGO_CFG_TARGET_OS",
    ] {
        let v = std::env::var(var).unwrap_or_default();
        println!("cargo:rustc-env=CAIRN_BUILD_{var}={v}");
    }
    println!("cargo:rerun-if-env-changed=CAIRN_GIT_VERSION");
    println!("cargo:rerun-if-changed=.git/HEAD");
    if let Some(r) = run("git", &["symbolic-ref", "-q", "HEAD"]) {
        println!("cargo:rerun-if-changed=.git/{r}");
    }
}
