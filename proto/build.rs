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
