//! Decoding a client-plane request: its window, dtype, comparison,
//! chunking and geometry, checked, with errors that name the call. Shared by
//! the unary service, the streams and the collectives.

use super::Error;
use crate::rank::{Rank, WindowId};
use pld_proto::region::{Chunking, Layout, Shape, Transfer};
use pld_proto::v1::Region;
use pld_proto::{Cmp, Dtype};
use std::time::Duration;
use tonic::metadata::MetadataMap;

/// The `grpc-timeout` the client set, if any ("100m", "5S", ...).
pub(crate) fn grpc_timeout(metadata: &MetadataMap) -> Option<Duration> {
    let v = metadata.get("grpc-timeout")?.to_str().ok()?;
    if v.len() < 2 {
        return None;
    }
    let (n, unit) = v.split_at(v.len() - 1);
    let n: u64 = n.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

pub(crate) fn dtype(call: &'static str, value: i32) -> Result<Dtype, Error> {
    match Dtype::try_from(value) {
        Ok(Dtype::Unspecified) => Err(Error::invalid(call, "the dtype is missing")),
        Ok(d) => Ok(d),
        Err(_) => Err(Error::invalid(call, format!("unknown dtype value {value}"))),
    }
}

/// Where a transfer lies in the window and in the packed bytes of the call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    pub dtype: Dtype,
    pub shape: Shape,
    pub window: Layout,
    /// Bytes the region holds, packed.
    pub packed_len: u64,
}

impl Geometry {
    /// `offset` bytes into the window, and either a region or `len` bytes.
    pub(crate) fn new(
        call: &'static str,
        dtype: Dtype,
        offset: u64,
        region: Option<&Region>,
        len: u64,
    ) -> Result<Geometry, Error> {
        let elem = dtype.size() as u64;
        if offset % elem != 0 {
            return Err(Error::invalid(
                call,
                format!(
                    "offset {offset} is not a multiple of the {dtype} element size ({elem} bytes)"
                ),
            ));
        }
        let (shape, stride) = match region {
            Some(r) => {
                let stride = if r.row_stride == 0 {
                    r.cols
                } else {
                    r.row_stride
                };
                (
                    Shape {
                        rows: r.rows,
                        cols: r.cols,
                    },
                    stride,
                )
            }
            None => {
                if len % elem != 0 {
                    return Err(Error::invalid(
                        call,
                        format!(
                            "length {len} is not a multiple of the {dtype} element size ({elem} bytes)"
                        ),
                    ));
                }
                let n = len / elem;
                (Shape { rows: 1, cols: n }, n)
            }
        };
        let packed_len = shape
            .elems()
            .and_then(|n| n.checked_mul(elem))
            .ok_or_else(|| {
                Error::invalid(
                    call,
                    format!(
                        "a region of {} x {} {dtype} is too large",
                        shape.rows, shape.cols
                    ),
                )
            })?;
        Ok(Geometry {
            dtype,
            shape,
            window: Layout {
                offset: offset / elem,
                row_stride: stride,
            },
            packed_len,
        })
    }

    fn packed(&self) -> Layout {
        Layout {
            offset: 0,
            row_stride: self.shape.cols,
        }
    }

    /// From the packed bytes into the window.
    pub(crate) fn store(&self) -> Transfer {
        Transfer {
            dtype: self.dtype,
            shape: self.shape,
            dst: self.window,
            src: self.packed(),
        }
    }

    /// From the window into packed bytes.
    pub(crate) fn load(&self) -> Transfer {
        Transfer {
            dtype: self.dtype,
            shape: self.shape,
            dst: self.packed(),
            src: self.window,
        }
    }
}

pub(crate) fn window(rank: &Rank, name: &str) -> Result<WindowId, Error> {
    Ok(rank.window(name)?)
}

/// A region's dtype, or `fallback` (bytes) without a region.
pub(crate) fn region_dtype(
    call: &'static str,
    region: Option<&Region>,
    fallback: Dtype,
) -> Result<Dtype, Error> {
    region.map_or(Ok(fallback), |r| dtype(call, r.dtype))
}

pub(crate) fn chunking(c: Option<&pld_proto::v1::Chunking>) -> Chunking {
    let Some(c) = c else {
        return Chunking::default();
    };
    let some = |v: u64| (v != 0).then_some(v);
    Chunking {
        chunk_rows: some(c.chunk_rows),
        chunk_cols: some(c.chunk_cols),
        pipeline: c.pipeline,
        depth: (c.depth != 0).then_some(c.depth as usize),
    }
}

pub(crate) fn check_data(call: &'static str, g: &Geometry, got: usize) -> Result<(), Error> {
    if g.packed_len != got as u64 {
        return Err(Error::invalid(
            call,
            format!(
                "the data holds {got} bytes, the region of {} x {} {} needs {}",
                g.shape.rows, g.shape.cols, g.dtype, g.packed_len
            ),
        ));
    }
    Ok(())
}

pub(crate) fn cmp(call: &'static str, value: i32) -> Result<Cmp, Error> {
    match Cmp::try_from(value) {
        Ok(Cmp::Unspecified) | Err(_) => Err(Error::invalid(
            call,
            format!("the comparison value {value} is none of EQ, NE, GT, GE, LT, LE"),
        )),
        Ok(c) => Ok(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_units_parse() {
        let mut m = MetadataMap::new();
        for (v, d) in [
            ("100m", Duration::from_millis(100)),
            ("5S", Duration::from_secs(5)),
            ("2M", Duration::from_secs(120)),
            ("7u", Duration::from_micros(7)),
        ] {
            m.insert("grpc-timeout", v.parse().unwrap());
            assert_eq!(grpc_timeout(&m), Some(d), "{v}");
        }
        m.insert("grpc-timeout", "12x".parse().unwrap());
        assert_eq!(grpc_timeout(&m), None);
    }

    #[test]
    fn geometry_rejects_misalignment_and_sizes_the_packed_region() {
        let e = Geometry::new("AtomicAdd", Dtype::Fp32, 2, None, 8).unwrap_err();
        assert!(e.to_string().contains("offset 2 is not a multiple"), "{e}");
        let e = Geometry::new("AtomicAdd", Dtype::Fp32, 4, None, 6).unwrap_err();
        assert!(e.to_string().contains("length 6"), "{e}");
        let region = Region {
            rows: 3,
            cols: 5,
            row_stride: 8,
            dtype: Dtype::Fp16 as i32,
        };
        let g = Geometry::new("Put", Dtype::Fp16, 16, Some(&region), 0).unwrap();
        assert_eq!(g.packed_len, 30);
        assert_eq!(
            g.window,
            Layout {
                offset: 8,
                row_stride: 8
            }
        );
        let huge = Region {
            rows: u64::MAX,
            cols: 2,
            ..region
        };
        assert!(Geometry::new("Put", Dtype::Fp16, 0, Some(&huge), 0).is_err());
    }
}
