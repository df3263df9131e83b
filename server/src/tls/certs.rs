//! Making a cluster's TLS material: a CA and one certificate per rank.
//!
//! `pld-daemon certs --ranks N --out DIR` writes it for real clusters; local
//! clusters (the demo, the tests, the simulator's launcher) make a
//! throwaway CA in memory with [`ClusterCa::throwaway`].

use super::{Identity, Security, server_name};
use crate::error::{Error, Result, TlsError};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn tls_err(what: &str) -> impl Fn(rcgen::Error) -> Error + '_ {
    move |error| {
        TlsError::Generate {
            what: what.to_string(),
            error,
        }
        .into()
    }
}

/// A cluster CA: signs one certificate per rank, naming the rank.
pub struct ClusterCa {
    cluster_id: String,
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl std::fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCa")
            .field("cluster_id", &self.cluster_id)
            .finish_non_exhaustive()
    }
}

/// One rank's certificate and private key, PEM-encoded.
#[derive(Clone)]
pub struct RankCert {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
}

impl std::fmt::Debug for RankCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankCert").finish_non_exhaustive()
    }
}

impl ClusterCa {
    /// A new CA (ECDSA P-256) for the cluster `cluster_id`.
    pub fn generate(cluster_id: &str) -> Result<ClusterCa> {
        let key = KeyPair::generate().map_err(tls_err("CA key"))?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("pld cluster CA ({cluster_id})"));
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params
            .self_signed(&key)
            .map_err(tls_err("CA certificate"))?;
        Ok(ClusterCa {
            cluster_id: cluster_id.to_string(),
            issuer: Issuer::new(params, key),
            cert_pem: cert.pem(),
        })
    }

    /// The CA certificate, PEM: what every rank trusts.
    pub fn ca_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A certificate for `rank`, valid as both TLS server and client, whose
    /// only name is `rank-R.pld`.
    pub fn issue(&self, rank: u32) -> Result<RankCert> {
        self.sign(
            vec![server_name(rank)],
            format!("pld rank {rank} ({})", self.cluster_id),
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    /// A server certificate for the gRPC client plane, valid for `names`
    /// (DNS names or IP addresses, as clients dial the daemons).
    pub fn issue_grpc(&self, names: &[String]) -> Result<RankCert> {
        self.sign(
            names.to_vec(),
            format!("pld client plane ({})", self.cluster_id),
            vec![ExtendedKeyUsagePurpose::ServerAuth],
        )
    }

    /// A new key and a certificate for it under this CA.
    fn sign(
        &self,
        names: Vec<String>,
        common_name: String,
        usages: Vec<ExtendedKeyUsagePurpose>,
    ) -> Result<RankCert> {
        let key = KeyPair::generate().map_err(tls_err("key"))?;
        let mut params = CertificateParams::new(names).map_err(tls_err("certificate names"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = usages;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(tls_err("certificate"))?;
        Ok(RankCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// `rank`'s identity, in memory.
    pub fn identity(&self, rank: u32) -> Result<Identity> {
        let c = self.issue(rank)?;
        Identity::from_pem(
            rank,
            self.cert_pem.as_bytes(),
            c.cert_pem.as_bytes(),
            c.key_pem.as_bytes(),
        )
    }

    /// A fresh CA and the security of each of `nranks` ranks under it: for
    /// clusters on one machine that live as long as the process.
    pub fn throwaway(nranks: u32) -> Result<Vec<Security>> {
        let ca = ClusterCa::generate("throwaway")?;
        (0..nranks)
            .map(|r| ca.identity(r).map(|i| Security::Tls(Arc::new(i))))
            .collect()
    }

    /// Writes `ca.pem`; for every rank `rank-R.pem` and `rank-R.key`; and
    /// `grpc.pem` / `grpc.key` for `grpc_names` (keys mode 0600) into
    /// `dir`, which is created if needed: what `pld-daemon --tls-dir DIR`
    /// (and `--grpc-tls`) reads. The CA's own key is not kept, so nobody
    /// can add a rank later; make a new set for a new cluster.
    pub fn write_dir(
        &self,
        dir: &Path,
        nranks: u32,
        grpc_names: &[String],
    ) -> Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir).map_err(write_err(dir))?;
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, &self.cert_pem).map_err(write_err(&ca))?;
        let mut written = vec![ca];
        for rank in 0..nranks {
            let (cert, key) = Identity::files(dir, rank);
            written.extend(write_pair(&self.issue(rank)?, cert, key)?);
        }
        let (cert, key) = (dir.join("grpc.pem"), dir.join("grpc.key"));
        written.extend(write_pair(&self.issue_grpc(grpc_names)?, cert, key)?);
        Ok(written)
    }
}

/// The names the gRPC certificate of a cluster on one machine carries.
pub const LOCAL_GRPC_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

fn write_err(path: &Path) -> impl Fn(std::io::Error) -> Error + use<> {
    let path = path.display().to_string();
    move |e| Error::io(format!("writing {path}"), e)
}

/// Writes a certificate and its key (mode 0600).
fn write_pair(c: &RankCert, cert: PathBuf, key: PathBuf) -> Result<[PathBuf; 2]> {
    std::fs::write(&cert, &c.cert_pem).map_err(write_err(&cert))?;
    write_private(&key, c.key_pem.as_bytes()).map_err(write_err(&key))?;
    Ok([cert, key])
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// A cluster's TLS material in a fresh temporary directory, removed on
/// drop: for local clusters of daemon processes (the demo, tests).
#[derive(Debug)]
pub struct TempTlsDir {
    dir: PathBuf,
}

impl TempTlsDir {
    /// A new CA and certificates for `nranks` ranks under
    /// `$TMPDIR/pld-tls-PID-N`.
    pub fn new(nranks: u32) -> Result<TempTlsDir> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pld-tls-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let names = LOCAL_GRPC_NAMES.map(String::from);
        ClusterCa::generate("throwaway")?.write_dir(&dir, nranks, &names)?;
        Ok(TempTlsDir { dir })
    }

    /// The directory, for `--tls-dir`.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// `rank`'s security, loaded from the directory.
    pub fn security(&self, rank: u32) -> Result<Security> {
        Security::from_dir(&self.dir, rank)
    }
}

impl Drop for TempTlsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
