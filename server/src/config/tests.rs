use super::*;

#[test]
fn sizes_take_binary_suffixes() {
    assert_eq!(parse_size("4096"), Ok(4096));
    assert_eq!(parse_size("64KiB"), Ok(64 << 10));
    assert_eq!(parse_size("64MiB"), Ok(64 << 20));
    assert_eq!(parse_size("1GiB"), Ok(1 << 30));
    assert_eq!(parse_size("2m"), Ok(2 << 20));
    assert!(parse_size("12XB").unwrap_err().contains("unknown unit"));
    assert!(parse_size("MiB").is_err());
    assert!(parse_size("99999999999999999999GiB").is_err());
}

#[test]
fn durations_take_units() {
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
    assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert!(parse_duration("soon").is_err());
}

#[test]
fn window_flags_parse_and_validate() {
    assert_eq!(
        "data=64MiB".parse::<WindowConfig>(),
        Ok(WindowConfig {
            name: "data".into(),
            size: 64 << 20
        })
    );
    assert!("data".parse::<WindowConfig>().is_err());
    assert!("a b=1".parse::<WindowConfig>().is_err());
    let mut c = Config::new(0, vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()]);
    let unset = c.validate().unwrap_err().to_string();
    assert!(unset.contains("no TLS material"), "{unset}");
    c.security = Security::Insecure;
    assert!(c.validate().is_ok());
    c.windows.push(WindowConfig {
        name: "data".into(),
        size: 1,
    });
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .contains("'data' is given twice")
    );
    c.windows = default_windows();
    c.rank = 2;
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .contains("rank 2 is not in the peer list")
    );
}

#[test]
fn host_port_splits_names_and_v6() {
    assert_eq!(split_host_port("rank0:7000"), Some(("rank0", 7000)));
    assert_eq!(split_host_port("[::1]:7"), Some(("::1", 7)));
    assert_eq!(split_host_port("nohost"), None);
    assert_eq!(split_host_port(":7"), None);
}

fn peers(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn ranks_on_this_host_counts_the_same_host_and_every_loopback() {
    let local = peers(&[
        "127.0.0.1:1",
        "localhost:2",
        "[::1]:3",
        "127.0.0.2:4",
        "node1:5",
    ]);
    assert_eq!(Config::new(0, local.clone()).ranks_on_this_host(), 4);
    assert_eq!(Config::new(4, local).ranks_on_this_host(), 1);
    let hosts = peers(&["node0:1", "NODE0:2", "node1:3", "node0:4", "bad"]);
    assert_eq!(Config::new(1, hosts.clone()).ranks_on_this_host(), 3);
    assert_eq!(Config::new(2, hosts.clone()).ranks_on_this_host(), 1);
    // An entry without a port counts for nobody, itself included.
    assert_eq!(Config::new(4, hosts).ranks_on_this_host(), 1);
}

#[test]
fn spin_turns_oversubscribed_only_past_the_cores() {
    let spin = Progress::spin(Duration::from_millis(5));
    assert!(!spin.on_host(2, 2).oversubscribed());
    assert!(spin.on_host(3, 2).oversubscribed());
    assert_eq!(
        spin.on_host(3, 2),
        Progress::Spin {
            idle: Duration::from_millis(5),
            oversubscribed: true
        }
    );
    // Set by hand, it stays; sleep stays sleep.
    assert!(spin.on_host(3, 2).on_host(1, 16).oversubscribed());
    assert_eq!(Progress::Sleep.on_host(64, 2), Progress::Sleep);
    // --spin-idle changes the idle time only.
    let idle = Duration::from_millis(9);
    assert_eq!(spin.with_spin_idle(idle), Progress::spin(idle));
    assert!(spin.on_host(3, 2).with_spin_idle(idle).oversubscribed());
    assert_eq!(Progress::Sleep.with_spin_idle(idle), Progress::Sleep);
}
