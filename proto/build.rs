//! Compiles `pld/v1/*.proto` with protox (pure Rust), so that no system
//! `protoc` is needed, and generates the prost message types. The gRPC
//! service's stubs are generated over these types by `pld-grpc`, so that
//! nothing that only speaks the wire or embeds a rank links a gRPC stack.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
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
    prost_build::Config::new()
        // Client-plane data fields are `Bytes`, so that put data and get
        // replies pass between gRPC and the rank without a copy.
        .bytes([".pld.v1"])
        .compile_fds(fds)?;
    Ok(())
}
