//! Name resolution that works in a static binary with no C library help.
//!
//! pld's container image is `FROM scratch` plus one statically linked
//! binary. Static glibc cannot load its NSS modules, so `getaddrinfo` fails
//! for every name there — yet peers are named (`rank1:7000`) and resolve
//! through Docker's or Kubernetes' DNS. [`resolve`] asks the system first
//! (so hosts with mDNS, systemd-resolved etc. behave as usual), then reads
//! `/etc/hosts`, then queries the nameservers of `/etc/resolv.conf` over
//! UDP itself (A records, with the search domains).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Resolves `HOST:PORT` to one socket address.
pub async fn resolve(addr: &str) -> io::Result<SocketAddr> {
    if let Ok(a) = addr.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = split(addr)?;
    if let Ok(mut it) = tokio::net::lookup_host(addr).await
        && let Some(a) = it.next()
    {
        return Ok(a);
    }
    if let Some(ip) = from_hosts(&read("/etc/hosts"), host) {
        return Ok(SocketAddr::new(ip, port));
    }
    let conf = ResolvConf::parse(&read("/etc/resolv.conf"));
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{host} does not resolve: no nameserver in /etc/resolv.conf"),
    );
    for name in conf.candidates(host) {
        for ns in &conf.nameservers {
            match query_a(*ns, &name).await {
                Ok(Some(ip)) => return Ok(SocketAddr::new(IpAddr::V4(ip), port)),
                Ok(None) => {
                    last = io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("{host} does not resolve: {ns} has no A record for {name}"),
                    )
                }
                Err(e) => {
                    last = io::Error::new(e.kind(), format!("{host} does not resolve: {ns}: {e}"))
                }
            }
        }
    }
    Err(last)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `host:port` or `[v6]:port`.
fn split(addr: &str) -> io::Result<(&str, u16)> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{addr:?} is not HOST:PORT"),
        )
    };
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse().map_err(|_| bad())?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host, port))
}

/// The address of `host` in an `/etc/hosts` text.
fn from_hosts(text: &str, host: &str) -> Option<IpAddr> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .find_map(|l| {
            let mut f = l.split_whitespace();
            let ip: IpAddr = f.next()?.parse().ok()?;
            f.any(|n| n.eq_ignore_ascii_case(host)).then_some(ip)
        })
}

#[derive(Debug, Default, PartialEq)]
struct ResolvConf {
    nameservers: Vec<SocketAddr>,
    search: Vec<String>,
    ndots: usize,
}

impl ResolvConf {
    fn parse(text: &str) -> ResolvConf {
        let mut c = ResolvConf {
            ndots: 1,
            ..ResolvConf::default()
        };
        for line in text.lines() {
            let mut f = line.split_whitespace();
            match f.next() {
                Some("nameserver") => {
                    if let Some(ip) = f.next().and_then(|s| s.parse::<IpAddr>().ok()) {
                        c.nameservers.push(SocketAddr::new(ip, 53));
                    }
                }
                Some("search") | Some("domain") => c.search = f.map(str::to_string).collect(),
                Some("options") => {
                    for o in f {
                        if let Some(n) = o.strip_prefix("ndots:").and_then(|n| n.parse().ok()) {
                            c.ndots = n;
                        }
                    }
                }
                _ => {}
            }
        }
        c
    }

    /// The names to try for `host`, in order.
    fn candidates(&self, host: &str) -> Vec<String> {
        let host = host.trim_end_matches('.');
        let searched = self.search.iter().map(|d| format!("{host}.{d}"));
        if host.matches('.').count() >= self.ndots {
            std::iter::once(host.to_string()).chain(searched).collect()
        } else {
            searched.chain(std::iter::once(host.to_string())).collect()
        }
    }
}

/// A DNS query for the A record of `name`.
fn encode_query(id: u16, name: &str) -> Option<Vec<u8>> {
    let mut q = Vec::with_capacity(18 + name.len());
    q.extend(id.to_be_bytes());
    q.extend([0x01, 0x00]); // recursion desired
    q.extend([0, 1, 0, 0, 0, 0, 0, 0]); // one question
    for label in name.split('.').filter(|l| !l.is_empty()) {
        if label.len() > 63 {
            return None;
        }
        q.push(label.len() as u8);
        q.extend(label.as_bytes());
    }
    q.push(0);
    q.extend([0, 1, 0, 1]); // A, IN
    Some(q)
}

/// Skips a (possibly compressed) name at `at`; returns the offset after it.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *msg.get(at)? as usize;
        match len {
            0 => return Some(at + 1),
            l if l & 0xC0 == 0xC0 => return Some(at + 2),
            l => at += 1 + l,
        }
    }
}

/// The first A record of a response to query `id`; `Ok(None)` when the
/// name has none. Never panics on a malformed response.
fn decode_answer(msg: &[u8], id: u16) -> Result<Option<Ipv4Addr>, &'static str> {
    let u16_at =
        |i: usize| -> Option<u16> { Some(u16::from_be_bytes([*msg.get(i)?, *msg.get(i + 1)?])) };
    if u16_at(0) != Some(id) {
        return Err("a reply to another query");
    }
    let flags = u16_at(2).ok_or("a short reply")?;
    match flags & 0x000F {
        0 => {}
        3 => return Ok(None),
        _ => return Err("the nameserver failed the query"),
    }
    let qd = u16_at(4).ok_or("a short reply")?;
    let an = u16_at(6).ok_or("a short reply")?;
    let mut at = 12;
    for _ in 0..qd {
        at = skip_name(msg, at).ok_or("a malformed reply")? + 4;
    }
    for _ in 0..an {
        at = skip_name(msg, at).ok_or("a malformed reply")?;
        let kind = u16_at(at).ok_or("a malformed reply")?;
        let class = u16_at(at + 2).ok_or("a malformed reply")?;
        let len = u16_at(at + 8).ok_or("a malformed reply")? as usize;
        let data = msg.get(at + 10..at + 10 + len).ok_or("a malformed reply")?;
        if kind == 1 && class == 1 && len == 4 {
            return Ok(Some(Ipv4Addr::new(data[0], data[1], data[2], data[3])));
        }
        at += 10 + len;
    }
    Ok(None)
}

async fn query_a(ns: SocketAddr, name: &str) -> io::Result<Option<Ipv4Addr>> {
    let bind: SocketAddr = if ns.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = tokio::net::UdpSocket::bind(bind).await?;
    sock.connect(ns).await?;
    let id = (std::process::id() as u16) ^ (name.len() as u16).rotate_left(8);
    let q = encode_query(id, name).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a DNS name"),
        )
    })?;
    let mut buf = vec![0u8; 1500];
    for _ in 0..3 {
        sock.send(&q).await?;
        match tokio::time::timeout(Duration::from_secs(1), sock.recv(&mut buf)).await {
            Ok(Ok(n)) => match decode_answer(&buf[..n], id) {
                Ok(a) => return Ok(a),
                Err("a reply to another query") => continue,
                Err(e) => return Err(io::Error::other(e)),
            },
            Ok(Err(e)) => return Err(e),
            Err(_) => continue,
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "no answer in 3 tries",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_resolv_conf_parse_as_libc_reads_them() {
        let hosts = "127.0.0.1 localhost\n# comment\n172.18.0.3\trank1 pld-rank1 # x\n";
        assert_eq!(
            from_hosts(hosts, "rank1"),
            Some("172.18.0.3".parse().unwrap())
        );
        assert_eq!(
            from_hosts(hosts, "PLD-RANK1"),
            Some("172.18.0.3".parse().unwrap())
        );
        assert_eq!(from_hosts(hosts, "comment"), None);
        let c = ResolvConf::parse(
            "nameserver 127.0.0.11\nsearch ns.svc.cluster.local svc.cluster.local\noptions ndots:5\n",
        );
        assert_eq!(c.nameservers, vec!["127.0.0.11:53".parse().unwrap()]);
        assert_eq!(
            c.candidates("pld-1.pld"),
            vec![
                "pld-1.pld.ns.svc.cluster.local",
                "pld-1.pld.svc.cluster.local",
                "pld-1.pld"
            ]
        );
        let plain = ResolvConf::parse("nameserver 10.0.0.1\n");
        assert_eq!(plain.candidates("rank1"), vec!["rank1"]);
        assert_eq!(split("[::1]:7000").unwrap(), ("::1", 7000));
        assert!(split("rank1").is_err() && split(":7000").is_err());
    }

    #[test]
    fn a_dns_answer_decodes_and_garbage_does_not_panic() {
        let q = encode_query(0x1234, "rank1").unwrap();
        // The reply: the question echoed, one CNAME-free A answer that
        // points back at the question's name.
        let mut r = q.clone();
        r[2] = 0x81;
        r[3] = 0x80;
        r[7] = 1;
        r.extend([0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 172, 18, 0, 3]);
        assert_eq!(
            decode_answer(&r, 0x1234),
            Ok(Some(Ipv4Addr::new(172, 18, 0, 3)))
        );
        assert_eq!(decode_answer(&r, 0x9999), Err("a reply to another query"));
        let mut nx = q.clone();
        nx[3] = 0x83;
        assert_eq!(decode_answer(&nx, 0x1234), Ok(None));
        for cut in 0..r.len() {
            let _ = decode_answer(&r[..cut], 0x1234);
        }
        let mut x = 7u32;
        for _ in 0..10_000 {
            let mut m = r.clone();
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let i = (x as usize >> 8) % m.len();
            m[i] = (x >> 24) as u8;
            let _ = decode_answer(&m, 0x1234);
        }
    }

    #[tokio::test]
    async fn numeric_and_local_names_resolve() {
        assert_eq!(
            resolve("127.0.0.1:7").await.unwrap(),
            "127.0.0.1:7".parse().unwrap()
        );
        assert_eq!(resolve("localhost:7").await.unwrap().port(), 7);
        assert!(resolve("no-port").await.is_err());
    }
}
