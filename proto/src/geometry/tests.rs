use super::*;

fn transfer(rows: u64, cols: u64, dtype: Dtype) -> Transfer {
    Transfer {
        dtype,
        shape: Shape { rows, cols },
        dst: Layout {
            offset: 0,
            row_stride: cols,
        },
        src: Layout {
            offset: 0,
            row_stride: cols,
        },
    }
}

#[test]
fn a_request_becomes_a_transfer_with_its_rules_checked() {
    let e = Geometry::from_request(Dtype::Fp32, 2, None, 8).unwrap_err();
    assert_eq!(
        e.to_string(),
        "offset 2 is not a multiple of the fp32 element size (4 bytes)"
    );
    let e = Geometry::from_request(Dtype::Fp32, 4, None, 6).unwrap_err();
    assert!(matches!(e, GeometryError::MisalignedLength { len: 6, .. }));
    let region = Region {
        rows: 3,
        cols: 5,
        row_stride: 8,
        dtype: Dtype::Fp16 as i32,
    };
    let g = Geometry::from_request(Dtype::Fp16, 16, Some(&region), 0).unwrap();
    assert_eq!(g.packed_len, 30);
    assert_eq!(
        g.window,
        Layout {
            offset: 8,
            row_stride: 8
        }
    );
    assert_eq!(g.store().dst, g.window);
    assert_eq!(g.load().src, g.window);
    assert!(g.check_data(30).is_ok());
    assert!(matches!(
        g.check_data(29),
        Err(GeometryError::DataLength {
            got: 29,
            need: 30,
            ..
        })
    ));
    // Stride 0 is packed rows.
    let packed = Region {
        row_stride: 0,
        ..region
    };
    let g = Geometry::from_request(Dtype::Fp16, 0, Some(&packed), 0).unwrap();
    assert_eq!(g.window.row_stride, 5);
    let huge = Region {
        rows: u64::MAX,
        cols: 2,
        ..region
    };
    assert!(matches!(
        Geometry::from_request(Dtype::Fp16, 0, Some(&huge), 0),
        Err(GeometryError::TooLarge { .. })
    ));
}

#[test]
fn buffers_must_hold_their_region() {
    let at = Layout {
        offset: 2,
        row_stride: 10,
    };
    let shape = Shape { rows: 3, cols: 4 };
    // Elements 2 .. 2 + 2*10 + 4 = 26, 4 bytes each.
    assert!(check_buffer(at, shape, 4, 104, "the source").is_ok());
    assert_eq!(
        check_buffer(at, shape, 4, 103, "the source").unwrap_err(),
        GeometryError::BufferTooSmall {
            what: "the source",
            len: 103,
            need: 104
        }
    );
    let overlapping = Layout {
        offset: 0,
        row_stride: 3,
    };
    assert!(matches!(
        check_buffer(overlapping, shape, 4, 1 << 20, "dst"),
        Err(GeometryError::Layout { what: "dst", .. })
    ));
    assert!(check_buffer(at, Shape { rows: 0, cols: 4 }, 4, 0, "x").is_ok());
    assert_eq!(
        byte_offset(
            Layout {
                offset: u64::MAX,
                row_stride: 1
            },
            2
        ),
        Err(GeometryError::OffsetOverflow(u64::MAX))
    );
}

#[test]
fn packed_regions_travel_as_bytes_and_strided_ones_with_their_stride() {
    let shape = Shape { rows: 2, cols: 4 };
    let packed = Layout {
        offset: 7,
        row_stride: 4,
    };
    assert_eq!(wire_region(Dtype::Int32, packed, shape), None);
    let strided = Layout {
        offset: 7,
        row_stride: 6,
    };
    assert_eq!(
        wire_region(Dtype::Int32, strided, shape),
        Some(Region {
            rows: 2,
            cols: 4,
            row_stride: 6,
            dtype: Dtype::Int32 as i32
        })
    );
}

#[test]
fn plans_fill_frames_and_pipelines_keep_their_depth() {
    // 1000 rows of 1000 fp32: 4000-byte rows, 262 of them per 1 MiB frame.
    let t = transfer(1000, 1000, Dtype::Fp32);
    let (p, depth) = plan(&t, &Chunking::default(), 1 << 20).unwrap();
    assert_eq!(
        p.chunk(),
        Shape {
            rows: 262,
            cols: 1000
        }
    );
    assert_eq!(depth, ((16 << 20) / (262 * 4000)) as usize);
    // Explicit chunks without a pipeline go one at a time.
    let (p, depth) = plan(&t, &Chunking::chunks(10, 100), 1 << 20).unwrap();
    assert_eq!(
        (p.chunk(), depth),
        (
            Shape {
                rows: 10,
                cols: 100
            },
            1
        )
    );
    let (_, depth) = plan(&t, &Chunking::pipelined(10, 100), 1 << 20).unwrap();
    assert_eq!(depth, MAX_DEFAULT_DEPTH as usize);
    let mut c = Chunking::pipelined(10, 100);
    c.depth = Some(1);
    assert_eq!(
        plan(&t, &c, 1 << 20).unwrap_err(),
        GeometryError::ShallowPipeline(1)
    );
    assert!(matches!(
        plan(&t, &Chunking::chunks(1000, 1000), 1 << 20),
        Err(GeometryError::ChunkTooLarge {
            bytes: 4_000_000,
            ..
        })
    ));
    let pipeline_only = Chunking {
        pipeline: true,
        ..Chunking::default()
    };
    assert_eq!(
        plan(&t, &pipeline_only, 1 << 20).unwrap_err(),
        GeometryError::PipelineWithoutChunks
    );
    let half = Chunking {
        chunk_rows: Some(4),
        ..Chunking::default()
    };
    assert_eq!(
        plan(&t, &half, 1 << 20).unwrap_err(),
        GeometryError::HalfChunking
    );
    assert_eq!(
        plan(&t, &Chunking::chunks(0, 4), 1 << 20).unwrap_err(),
        GeometryError::EmptyChunk { rows: 0, cols: 4 }
    );
}
