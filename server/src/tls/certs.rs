//! Making a cluster's TLS material: a CA and one certificate per rank.
//!
//! `pld-daemon certs --ranks N --out DIR` writes it for real clusters; local
//! clusters (the demo, the tests, the simulator's launcher) make a
//! throwaway CA in memory with [`ClusterCa::throwaway`].

use super::{Identity, Security, server_name};
use crate::error::{Error, Result, TlsError};
use crate::private::{PrivateDir, write_new};
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
    /// `dir`: what `pld-daemon --tls-dir DIR` (and `--grpc-tls`) reads.
    /// `dir` is made (mode 0700) if missing, and used only if it is this
    /// user's and no one else can write into it; every file is new
    /// (`O_EXCL | O_NOFOLLOW`, [`crate::private::write_new`]), so an
    /// existing file or a symlink planted in `dir` is refused, never
    /// overwritten or followed. The CA's own key is not kept, so nobody can
    /// add a rank later; make a new set for a new cluster.
    pub fn write_dir(
        &self,
        dir: &Path,
        nranks: u32,
        grpc_names: &[String],
    ) -> Result<Vec<PathBuf>> {
        crate::private::ensure_own_dir(dir).map_err(write_err(dir))?;
        let ca = dir.join("ca.pem");
        write_new(&ca, self.cert_pem.as_bytes(), 0o644).map_err(write_err(&ca))?;
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

/// Writes a certificate and its key (mode 0600), each a new file.
fn write_pair(c: &RankCert, cert: PathBuf, key: PathBuf) -> Result<[PathBuf; 2]> {
    write_new(&cert, c.cert_pem.as_bytes(), 0o644).map_err(write_err(&cert))?;
    write_new(&key, c.key_pem.as_bytes(), 0o600).map_err(write_err(&key))?;
    Ok([cert, key])
}

/// A cluster's TLS material in a fresh private directory
/// ([`PrivateDir`]: a random name, mode 0700), removed on drop: for local
/// clusters of processes (the demo, `pld-oshrun`, tests).
#[derive(Debug)]
pub struct TempTlsDir {
    dir: PrivateDir,
}

impl TempTlsDir {
    /// A new CA and certificates for `nranks` ranks (and the gRPC plane of
    /// this host) under `$TMPDIR/pld-tls-XXXXXX`.
    pub fn new(nranks: u32) -> Result<TempTlsDir> {
        let names = LOCAL_GRPC_NAMES.map(String::from);
        TempTlsDir::named("pld-tls", "throwaway", nranks, &names)
    }

    /// A new CA for `cluster_id` and certificates for `nranks` ranks and
    /// `grpc_names` under `$TMPDIR/PREFIX-XXXXXX`.
    pub fn named(
        prefix: &str,
        cluster_id: &str,
        nranks: u32,
        grpc_names: &[String],
    ) -> Result<TempTlsDir> {
        let dir = PrivateDir::new(prefix)
            .map_err(|e| Error::io("making the cluster's key directory", e))?;
        ClusterCa::generate(cluster_id)?.write_dir(dir.path(), nranks, grpc_names)?;
        Ok(TempTlsDir { dir })
    }

    /// The directory, for `--tls-dir`.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `rank`'s security, loaded from the directory.
    pub fn security(&self, rank: u32) -> Result<Security> {
        Security::from_dir(self.dir.path(), rank)
    }

    /// Leaves the directory in place when this is dropped (for a cluster
    /// that lives as long as the process); its path.
    pub fn keep(self) -> PathBuf {
        self.dir.keep()
    }
}
