//! Compiles `pld/v1/*.proto` with protox (pure Rust), so that no system
//! `protoc` is needed, and generates the prost types — plus, with the `grpc`
//! feature, the tonic client and server of the client plane and the encoded
//! descriptor set that server reflection serves.

use prost::Message;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let dir = root.join("pld/v1");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "proto") {
            println!("cargo:rerun-if-changed={}", path.display());
            files.push(path);
        }
    }
    files.sort();
    println!("cargo:rerun-if-changed={}", dir.display());
    let fds = protox::compile(&files, [&root])?;
    std::fs::write(out.join("pld_descriptor.bin"), fds.encode_to_vec())?;
    std::fs::write(out.join("pld_methods.rs"), methods(&fds)?)?;
    let grpc = std::env::var_os("CARGO_FEATURE_GRPC").is_some();
    tonic_prost_build::configure()
        .build_client(grpc)
        .build_server(grpc)
        // No tonic transport in this crate: clients are generic over the
        // channel, which the client crate brings.
        .build_transport(false)
        // Client-plane data fields are `Bytes`, so that put data and get
        // replies pass between gRPC and the rank without a copy.
        .bytes(".pld.v1")
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
