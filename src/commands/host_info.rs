//! `hostInfo`: facts about the machine the server runs on, read live from the kernel
//! ([`crate::sysinfo`]).

use bson::rawdoc;

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};
use crate::sysinfo;

/// `hostInfo`.
pub static COMMAND: Command = Command {
    name: "hostInfo",
    aliases: &[],
    help: "returns information about the daemon's host",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::HostInfo]),
    run,
};

/// MongoDB's "pretty host name": the bare host on port 27017, `host:port` otherwise.
pub fn pretty_host_name(host: &str, port: u16) -> String {
    if port == 27017 {
        host.to_string()
    } else {
        format!("{host}:{port}")
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    let cpu = sysinfo::cpu_info();
    let numa = sysinfo::numa_nodes();
    let (os_name, os_version) = sysinfo::os_release();
    let num_pages = sysinfo::num_pages();
    let body = rawdoc! {
        "system": {
            "currentTime": bson::DateTime::now(),
            "hostname": pretty_host_name(&inv.server.host, inv.client.local.port()),
            "cpuAddrSize": (usize::BITS as i32),
            "memSizeMB": sysinfo::mem_size_mb(),
            "memLimitMB": sysinfo::mem_limit_mb(),
            "numCores": cpu.logical,
            "numPhysicalCores": cpu.physical_cores,
            "numCpuSockets": cpu.sockets,
            "cpuArch": std::env::consts::ARCH,
            "numaEnabled": numa > 1,
            "numNumaNodes": numa.max(1),
        },
        "os": {
            "type": "Linux",
            "name": os_name,
            "version": os_version,
        },
        "extra": {
            "versionString": sysinfo::kernel_version_string(),
            "kernelVersion": sysinfo::kernel_release(),
            "cpuFrequencyMHz": cpu.mhz,
            "cpuFeatures": cpu.features,
            "pageSize": (sysinfo::page_size() as i64),
            "numPages": (i32::try_from(num_pages).unwrap_or(i32::MAX)),
            "maxOpenFiles": (sysinfo::max_open_files().and_then(|n| i32::try_from(n).ok()).unwrap_or(-1)),
            "physicalCores": cpu.physical_cores,
        },
    };
    ready(Ok(body.into()))
}
