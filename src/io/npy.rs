//! NumPy `.npy` files (format version 1.0/2.0, C order, little endian): read u8, u16, i32, u32,
//! f32 and f64 2-D arrays (and H×W×3 u8 as RGB); write 2-D arrays of the same types. Enough for
//! label images and float maps to round-trip with `numpy.load`/`numpy.save`.

use std::io::{Read, Write};

use super::IoError;

/// Element types we read and write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpyDtype {
    /// `|u1`
    U8,
    /// `<u2`
    U16,
    /// `<i4`
    I32,
    /// `<u4`
    U32,
    /// `<f4`
    F32,
    /// `<f8`
    F64,
    /// `<i8`
    I64,
}

impl NpyDtype {
    /// The `descr` string of the header (`"<u2"`, …).
    #[must_use]
    pub fn descr(self) -> &'static str {
        match self {
            Self::U8 => "|u1",
            Self::U16 => "<u2",
            Self::I32 => "<i4",
            Self::U32 => "<u4",
            Self::F32 => "<f4",
            Self::F64 => "<f8",
            Self::I64 => "<i8",
        }
    }
    fn from_descr(d: &str) -> Option<Self> {
        Some(match d {
            "|u1" | "<u1" | "u1" => Self::U8,
            "<u2" => Self::U16,
            "<i4" => Self::I32,
            "<u4" => Self::U32,
            "<f4" => Self::F32,
            "<f8" => Self::F64,
            "<i8" => Self::I64,
            _ => return None,
        })
    }
    /// Bytes per element.
    #[must_use]
    pub fn size(self) -> usize {
        match self {
            Self::U8 => 1,
            Self::U16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::F64 | Self::I64 => 8,
        }
    }
}

/// A decoded array: dtype, shape and raw little-endian bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// Element type.
    pub dtype: NpyDtype,
    /// Shape, C order.
    pub shape: Vec<usize>,
    /// Raw little-endian element bytes.
    pub bytes: Vec<u8>,
}

/// Values that can be written to `.npy`.
pub trait NpyElement: Copy {
    /// The dtype.
    const DTYPE: NpyDtype;
    /// Appends the little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! npy_el {
    ($t:ty, $d:expr) => {
        impl NpyElement for $t {
            const DTYPE: NpyDtype = $d;
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}
npy_el!(u8, NpyDtype::U8);
npy_el!(u16, NpyDtype::U16);
npy_el!(i32, NpyDtype::I32);
npy_el!(u32, NpyDtype::U32);
npy_el!(f32, NpyDtype::F32);
npy_el!(f64, NpyDtype::F64);
npy_el!(i64, NpyDtype::I64);

impl NpyArray {
    /// Every element widened to `f64` (exact for all dtypes but large `i64`).
    #[must_use]
    pub fn to_f64(&self) -> Vec<f64> {
        let b = &self.bytes;
        match self.dtype {
            NpyDtype::U8 => b.iter().map(|&v| f64::from(v)).collect(),
            NpyDtype::U16 => b
                .as_chunks::<2>()
                .0
                .iter()
                .map(|c| f64::from(u16::from_le_bytes(*c)))
                .collect(),
            NpyDtype::I32 => b
                .as_chunks::<4>()
                .0
                .iter()
                .map(|c| f64::from(i32::from_le_bytes(*c)))
                .collect(),
            NpyDtype::U32 => b
                .as_chunks::<4>()
                .0
                .iter()
                .map(|c| f64::from(u32::from_le_bytes(*c)))
                .collect(),
            NpyDtype::F32 => b
                .as_chunks::<4>()
                .0
                .iter()
                .map(|c| f64::from(f32::from_le_bytes(*c)))
                .collect(),
            NpyDtype::F64 => b
                .as_chunks::<8>()
                .0
                .iter()
                .map(|c| f64::from_le_bytes(*c))
                .collect(),
            NpyDtype::I64 => b
                .as_chunks::<8>()
                .0
                .iter()
                .map(|c| i64::from_le_bytes(*c) as f64)
                .collect(),
        }
    }
}

/// Reads a `.npy` file from disk.
pub fn read_file(path: &std::path::Path) -> Result<NpyArray, IoError> {
    let mut f = std::fs::File::open(path)?;
    read(&mut f)
}

/// Writes a C-order array with the given shape.
pub fn write<T: NpyElement>(
    w: &mut impl Write,
    shape: &[usize],
    data: impl Iterator<Item = T>,
) -> Result<(), IoError> {
    let shape_txt = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_txt}, }}",
        T::DTYPE.descr()
    );
    // Pad so that magic(6) + version(2) + len(2) + header + '\n' is a multiple of 64.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let hlen =
        u16::try_from(header.len()).map_err(|_| IoError::Format("npy header too long".into()))?;
    let mut out =
        Vec::with_capacity(10 + header.len() + shape.iter().product::<usize>() * T::DTYPE.size());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&hlen.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        v.put(&mut out);
    }
    w.write_all(&out)?;
    Ok(())
}

fn header_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let k = format!("'{key}':");
    let start = header.find(&k)? + k.len();
    Some(header[start..].trim_start())
}

/// Reads an array (any of the supported dtypes, C order).
pub fn read(r: &mut impl Read) -> Result<NpyArray, IoError> {
    let mut all = Vec::new();
    r.read_to_end(&mut all)?;
    if all.len() < 10 || &all[..6] != b"\x93NUMPY" {
        return Err(IoError::Format("not a .npy file (bad magic)".into()));
    }
    let (hlen, off) = match all[6] {
        1 => (usize::from(u16::from_le_bytes([all[8], all[9]])), 10),
        2 | 3 => {
            if all.len() < 12 {
                return Err(IoError::Format("truncated .npy header".into()));
            }
            (
                u32::from_le_bytes([all[8], all[9], all[10], all[11]]) as usize,
                12,
            )
        }
        v => return Err(IoError::Format(format!(".npy version {v} not supported"))),
    };
    let header = all
        .get(off..off + hlen)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| IoError::Format("truncated .npy header".into()))?;
    let descr = header_value(header, "descr")
        .and_then(|v| v.strip_prefix('\''))
        .and_then(|v| v.split('\'').next())
        .ok_or_else(|| IoError::Format("npy header has no descr".into()))?;
    let dtype = NpyDtype::from_descr(descr)
        .ok_or_else(|| IoError::Unsupported(format!(".npy dtype {descr}")))?;
    if header_value(header, "fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err(IoError::Unsupported("Fortran-order .npy".into()));
    }
    let shape_txt = header_value(header, "shape")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split(')').next())
        .ok_or_else(|| IoError::Format("npy header has no shape".into()))?;
    let shape: Vec<usize> = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| IoError::Format(format!("bad npy shape ({shape_txt})")))?;
    let n: usize = shape
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .ok_or_else(|| IoError::Format("npy shape overflows".into()))?;
    let need = n
        .checked_mul(dtype.size())
        .ok_or_else(|| IoError::Format("npy size overflows".into()))?;
    let body = &all[off + hlen..];
    if body.len() < need {
        return Err(IoError::Format(format!(
            ".npy data truncated: {} of {need} bytes",
            body.len()
        )));
    }
    Ok(NpyArray {
        dtype,
        shape,
        bytes: body[..need].to_vec(),
    })
}

/// Golden arrays of the tests (`tests/data/<folder>/`), values widened to f64.
#[cfg(test)]
pub(crate) mod golden {
    use std::path::PathBuf;

    /// A parsed `.npy` golden: shape and values widened to f64.
    pub(crate) struct Npy {
        pub shape: Vec<usize>,
        pub data: Vec<f64>,
    }

    /// `tests/data/<folder>`.
    pub(crate) fn data_dir(folder: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join("data")
            .join(folder)
    }

    /// `tests/data/<folder>/<name>`, or a panic naming the file.
    pub(crate) fn load(folder: &str, name: &str) -> Npy {
        let p = data_dir(folder).join(name);
        let a = super::read_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        Npy {
            data: a.to_f64(),
            shape: a.shape,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_pads_header() {
        let mut buf = Vec::new();
        write(&mut buf, &[2, 3], [1i32, -2, 3, 4, 5, 6].into_iter()).unwrap();
        let hlen = usize::from(u16::from_le_bytes([buf[8], buf[9]]));
        assert_eq!((10 + hlen) % 64, 0);
        let a = read(&mut buf.as_slice()).unwrap();
        assert_eq!(a.dtype, NpyDtype::I32);
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(&a.bytes[4..8], &(-2i32).to_le_bytes());
    }

    #[test]
    fn rejects_garbage_and_truncation() {
        assert!(read(&mut &b"hello world, not numpy"[..]).is_err());
        let mut buf = Vec::new();
        write(&mut buf, &[4, 4], 0..16u16).unwrap();
        buf.truncate(buf.len() - 3);
        assert!(
            read(&mut buf.as_slice())
                .unwrap_err()
                .to_string()
                .contains("truncated")
        );
    }
}
