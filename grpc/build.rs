//! Generates the tonic client and server of `service Pld` from
//! `proto/pld/v1/pld.proto` (compiled with protox: no system `protoc`), with
//! every message type taken from `pld_proto::v1` rather than generated
//! again; and the encoded descriptor set that server reflection serves, and
//! [`Method`], from the same compile.

use prost::Message;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    // The service's file; protox brings its imports (types.proto) along.
    for f in ["pld/v1/pld.proto", "pld/v1/types.proto"] {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let fds = protox::compile(["pld/v1/pld.proto"], [&root])?;
    std::fs::write(out.join("pld_descriptor.bin"), fds.encode_to_vec())?;
    std::fs::write(out.join("pld_methods.rs"), methods(&fds)?)?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // No tonic transport in this crate: clients are generic over the
        // channel, which the client crate brings.
        .build_transport(false)
        // The messages are pld-proto's (one definition of each type).
        .extern_path(".pld.v1", "::pld_proto::v1")
        .compile_fds(fds)?;
    Ok(())
}

/// `Method`: one variant per rpc of `service Pld`, in the order of the
/// file, so that the counters and every other per-method table are read
/// off the service itself and a new rpc cannot be left out of them.
fn methods(fds: &prost_types::FileDescriptorSet) -> Result<String, Box<dyn std::error::Error>> {
    let service = fds
        .file
        .iter()
        .flat_map(|f| &f.service)
        .find(|s| s.name() == "Pld")
        .ok_or("no service Pld in pld/v1")?;
    let names: Vec<&str> = service.method.iter().map(|m| m.name()).collect();
    let mut s = String::new();
    s.push_str("/// The methods of `service Pld`, generated from `pld.proto`.\n");
    s.push_str("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\n");
    s.push_str("pub enum Method {\n");
    for n in &names {
        s.push_str(&format!("    /// `rpc {n}`.\n    {n},\n"));
    }
    s.push_str("}\n\nimpl Method {\n");
    s.push_str(&format!(
        "    /// Every method, in the order of the service.\n    pub const ALL: [Method; {}] = [{}];\n\n",
        names.len(),
        names.iter().map(|n| format!("Method::{n}")).collect::<Vec<_>>().join(", ")
    ));
    s.push_str("    /// The method's name, as gRPC paths and `/metrics` write it.\n");
    s.push_str("    pub const fn name(self) -> &'static str {\n        match self {\n");
    for n in &names {
        s.push_str(&format!("            Method::{n} => \"{n}\",\n"));
    }
    s.push_str("        }\n    }\n}\n");
    Ok(s)
}
