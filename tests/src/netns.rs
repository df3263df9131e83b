//! A lab of network namespaces for partition tests: one namespace per
//! rank, each with an `eth0` on a bridge that lives in a hub namespace,
//! addresses 10.77.0.(R+1)/24. Nothing touches the host's own network. A
//! test cuts a rank off (its bridge port down) while its process runs.
//! Needs root and iproute2; [`Lab::unavailable`] says why not.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs `ip ARGS`, panicking with its stderr on failure.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Namespaces for `n` ranks; removed on drop.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    n: u32,
}

impl Lab {
    /// Why namespaces cannot be made here (not root, no `ip`), if so.
    pub fn unavailable() -> Option<String> {
        if euid() != Some(0) {
            return Some("network namespaces need root".into());
        }
        match Command::new("ip").args(["netns", "list"]).output() {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!(
                "ip netns does not work: {}",
                String::from_utf8_lossy(&o.stderr)
            )),
            Err(e) => Some(format!("iproute2's ip is not installed: {e}")),
        }
    }

    /// Makes the hub, the bridge and one namespace per rank.
    pub fn new(n: u32) -> Lab {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let lab = Lab {
            prefix: format!(
                "pld{}x{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
            n,
        };
        let hub = lab.hub();
        ip(&["netns", "add", &hub]);
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        for r in 0..n {
            let ns = lab.ns(r);
            let port = format!("v{r}");
            ip(&["netns", "add", &ns]);
            ip(&[
                "-n", &hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ]);
            ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", lab.ip(r)),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        lab
    }

    fn hub(&self) -> String {
        format!("{}h", self.prefix)
    }

    /// Rank `r`'s namespace.
    pub fn ns(&self, r: u32) -> String {
        format!("{}r{r}", self.prefix)
    }

    /// Rank `r`'s address.
    pub fn ip(&self, r: u32) -> String {
        format!("10.77.0.{}", r + 1)
    }

    /// Every rank's `HOST:PORT` on the lab network.
    pub fn peers(&self, port: u16) -> Vec<String> {
        (0..self.n)
            .map(|r| format!("{}:{port}", self.ip(r)))
            .collect()
    }

    /// `program` to run inside rank `r`'s namespace.
    pub fn command(&self, r: u32, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(r)]).arg(program);
        c
    }

    /// Cuts rank `r` off: its bridge port goes down, every packet to and
    /// from it is lost.
    pub fn cut(&self, r: u32) {
        ip(&["-n", &self.hub(), "link", "set", &format!("v{r}"), "down"]);
    }

    /// Undoes [`Lab::cut`].
    pub fn heal(&self, r: u32) {
        ip(&["-n", &self.hub(), "link", "set", &format!("v{r}"), "up"]);
    }

    /// Limits what reaches rank `r` to `rate` (tc's units, e.g. `200mbit`),
    /// so that a transfer to it takes long enough to be cut in the middle.
    pub fn limit_to(&self, r: u32, rate: &str) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.hub(), "tc", "qdisc", "add", "dev"])
            .arg(format!("v{r}"))
            .args([
                "root", "tbf", "rate", rate, "burst", "256kb", "latency", "500ms",
            ])
            .output()
            .expect("run tc");
        assert!(
            out.status.success(),
            "tc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for r in 0..self.n {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(r)])
                .status();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.hub()])
            .status();
    }
}

/// This process's effective user id (Linux).
fn euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uids = status.lines().find(|l| l.starts_with("Uid:"))?;
    uids.split_whitespace().nth(2)?.parse().ok()
}
