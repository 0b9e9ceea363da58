//! Host and process facts for `hostInfo` and `serverStatus`, read from the kernel.
//!
//! Everything here is read at call time from `/proc`, `/sys` and `uname(2)` (via rustix's safe
//! wrappers); a value that cannot be read is reported as absent or zero, never invented.

use std::collections::BTreeSet;
use std::fs;

/// The host name (`uname` nodename).
pub fn hostname() -> String {
    let u = rustix::system::uname();
    u.nodename().to_string_lossy().into_owned()
}

/// Kernel release, e.g. `6.1.0-18-amd64`.
pub fn kernel_release() -> String {
    rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned()
}

/// The `/proc/version` banner.
pub fn kernel_version_string() -> String {
    fs::read_to_string("/proc/version")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The memory page size in bytes.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

fn meminfo_kb(key: &str) -> Option<u64> {
    let s = fs::read_to_string("/proc/meminfo").ok()?;
    s.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

/// Total physical memory in MiB.
pub fn mem_size_mb() -> i64 {
    meminfo_kb("MemTotal")
        .map(|kb| (kb / 1024) as i64)
        .unwrap_or(0)
}

/// The memory available to this process in MiB: physical memory, lowered by a cgroup limit.
pub fn mem_limit_mb() -> i64 {
    let total = mem_size_mb();
    let cgroup = fs::read_to_string("/sys/fs/cgroup/memory.max")
        .or_else(|_| fs::read_to_string("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(|b| (b / (1024 * 1024)) as i64);
    match cgroup {
        Some(c) if c > 0 && c < total => c,
        _ => total,
    }
}

/// CPU facts from `/proc/cpuinfo`.
#[derive(Debug, Default, Clone)]
pub struct CpuInfo {
    /// Logical processors.
    pub logical: i32,
    /// Distinct (socket, core) pairs.
    pub physical_cores: i32,
    /// Distinct sockets.
    pub sockets: i32,
    /// `cpu MHz` of the first processor.
    pub mhz: String,
    /// `flags` of the first processor.
    pub features: String,
}

/// Reads `/proc/cpuinfo`.
pub fn cpu_info() -> CpuInfo {
    let Ok(s) = fs::read_to_string("/proc/cpuinfo") else {
        let n = std::thread::available_parallelism()
            .map(|n| n.get() as i32)
            .unwrap_or(1);
        return CpuInfo {
            logical: n,
            physical_cores: n,
            sockets: 1,
            ..CpuInfo::default()
        };
    };
    let mut info = CpuInfo::default();
    let mut cores = BTreeSet::new();
    let mut sockets = BTreeSet::new();
    let mut socket = String::new();
    for line in s.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "processor" => info.logical += 1,
            "physical id" => {
                socket = v.to_string();
                sockets.insert(v.to_string());
            }
            "core id" => {
                cores.insert((socket.clone(), v.to_string()));
            }
            "cpu MHz" if info.mhz.is_empty() => info.mhz = v.to_string(),
            "flags" if info.features.is_empty() => info.features = v.to_string(),
            _ => {}
        }
    }
    info.physical_cores = if cores.is_empty() {
        info.logical
    } else {
        cores.len() as i32
    };
    info.sockets = sockets.len().max(1) as i32;
    info
}

/// NUMA nodes under `/sys/devices/system/node`.
pub fn numa_nodes() -> i32 {
    fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.strip_prefix("node")
                        .is_some_and(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_digit()))
                })
                .count() as i32
        })
        .unwrap_or(0)
}

/// `(NAME, VERSION_ID)` from `/etc/os-release`.
pub fn os_release() -> (String, String) {
    let s = fs::read_to_string("/etc/os-release")
        .or_else(|_| fs::read_to_string("/usr/lib/os-release"))
        .unwrap_or_default();
    let field = |key: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_default()
    };
    (field("NAME"), field("VERSION_ID"))
}

/// The soft limit on open files for this process.
pub fn max_open_files() -> Option<i64> {
    let s = fs::read_to_string("/proc/self/limits").ok()?;
    let line = s.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Resident and virtual memory of this process in MiB (`/proc/self/statm`).
pub fn process_memory_mb() -> Option<(i32, i32)> {
    let s = fs::read_to_string("/proc/self/statm").ok()?;
    let mut it = s.split_whitespace();
    let virt: u64 = it.next()?.parse().ok()?;
    let res: u64 = it.next()?.parse().ok()?;
    let page = page_size() as u64;
    let mb = |pages: u64| (pages * page / (1024 * 1024)) as i32;
    Some((mb(res), mb(virt)))
}

/// Physical pages on the machine.
pub fn num_pages() -> i64 {
    meminfo_kb("MemTotal")
        .map(|kb| (kb * 1024 / page_size() as u64) as i64)
        .unwrap_or(0)
}

/// `(used, total)` bytes of the filesystem holding `path`.
pub fn filesystem_usage(path: &std::path::Path) -> Option<(u64, u64)> {
    let st = rustix::fs::statvfs(path).ok()?;
    let total = st.f_blocks.saturating_mul(st.f_frsize);
    let free = st.f_bfree.saturating_mul(st.f_frsize);
    Some((total.saturating_sub(free), total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_real_values() {
        assert!(!hostname().is_empty());
        assert!(mem_size_mb() > 0);
        assert!(mem_limit_mb() > 0 && mem_limit_mb() <= mem_size_mb());
        let cpu = cpu_info();
        assert!(cpu.logical >= 1 && cpu.physical_cores >= 1 && cpu.sockets >= 1);
        let (res, virt) = process_memory_mb().unwrap();
        assert!(virt >= res);
        assert!(page_size() >= 4096);
        assert!(max_open_files().unwrap() > 0);
    }
}
