//! Kernel compilation with NVRTC, include expansion and an on-disk cache.
//!
//! Kernels live in `kernels/*.cu`, shared helpers in `kernels/common/*.cuh` and the parts of a
//! large module in `kernels/<module>/*.cuh`; all are embedded in the binary
//! (`crate::kernels::SOURCES` / `HEADERS`). `#include "common/x.cuh"` (or `"segmentation/x.cuh"`) lines are
//! expanded textually before compilation (NVRTC has no file system view of the binary), so a
//! module compiles the same here, in CI and on the device. Kernels have no compile-time
//! switches: what a module compiles to depends on its source and the target architecture only.
//!
//! PTX is cached under `$XDG_CACHE_HOME/morphoscope` (else `~/.cache/morphoscope`) in a file named by module, source hash, architecture and NVRTC
//! version. Each file's first line holds a checksum of the rest; an entry whose checksum does
//! not match is treated as missing and recompiled, never trusted.

use std::path::PathBuf;

use cudarc::nvrtc::{CompileError, CompileOptions};

use super::error::GpuError;
use crate::kernels::KernelSource;

/// FNV-1a, 64 bit: a stable hash for cache keys (no dependency, stable across Rust versions).
#[must_use]
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Replaces `#include "NAME"` lines (a name in `headers`) with the embedded header text (headers
/// may include other headers; each header is expanded once).
pub(crate) fn expand_includes(
    module: &str,
    source: &str,
    headers: &[(&str, &str)],
) -> Result<String, GpuError> {
    let mut out = String::with_capacity(source.len() * 2);
    let mut seen = Vec::new();
    expand_into(module, source, headers, &mut seen, &mut out, 0)?;
    Ok(out)
}

fn expand_into(
    module: &str,
    source: &str,
    headers: &[(&str, &str)],
    seen: &mut Vec<String>,
    out: &mut String,
    depth: usize,
) -> Result<(), GpuError> {
    for line in source.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("#include") {
            let rest = rest.trim();
            if let Some(name) = rest.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
                let Some((_, text)) = headers.iter().find(|(n, _)| *n == name) else {
                    return Err(GpuError::Compile {
                        module: module.to_owned(),
                        arch: String::new(),
                        log: format!("header \"{name}\" is not embedded (crate::kernels::HEADERS)"),
                    });
                };
                if depth < 8 && !seen.iter().any(|s| s == name) {
                    seen.push(name.to_owned());
                    out.push_str(&format!("// ---- begin {name}\n"));
                    expand_into(module, text, headers, seen, out, depth + 1)?;
                    out.push_str(&format!("// ---- end {name}\n"));
                }
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(())
}

/// True when libnvrtc can be loaded.
#[must_use]
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library by its candidate names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// NVRTC's (major, minor) version.
pub fn nvrtc_version() -> Result<(i32, i32), GpuError> {
    if !nvrtc_present() {
        return Err(GpuError::NoNvrtc);
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present (checked above); the pointers are valid for the call.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        Ok((major, minor))
    } else {
        Err(GpuError::NoNvrtc)
    }
}

/// Architectures the loaded NVRTC can target, as `sm_XY` names (NVRTC 13 dropped sm_72 and
/// older; NVRTC 12 still has them).
pub fn supported_archs() -> Result<Vec<String>, GpuError> {
    if !nvrtc_present() {
        return Err(GpuError::NoNvrtc);
    }
    let mut n = 0;
    // SAFETY: the library is present; `n` is a valid out-pointer.
    unsafe { cudarc::nvrtc::sys::nvrtcGetNumSupportedArchs(&mut n) };
    let mut v = vec![0i32; usize::try_from(n).unwrap_or(0)];
    if !v.is_empty() {
        // SAFETY: `v` holds exactly the number of entries NVRTC reported.
        unsafe { cudarc::nvrtc::sys::nvrtcGetSupportedArchs(v.as_mut_ptr()) };
    }
    Ok(v.into_iter().map(|a| format!("sm_{a}")).collect())
}

/// Compiles one module to PTX for `arch` (`sm_90`, `sm_87`, ...). No caching.
pub fn compile_ptx(
    module: &KernelSource,
    headers: &[(&str, &str)],
    arch: &str,
) -> Result<String, GpuError> {
    if !nvrtc_present() {
        return Err(GpuError::NoNvrtc);
    }
    let src = expand_includes(module.name, module.source, headers)?;
    let opts = CompileOptions {
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".to_owned(),
            "-default-device".to_owned(),
        ],
        name: Some(format!("{}.cu", module.name)),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(src, opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(CompileError::CompileError { log, .. }) => Err(GpuError::Compile {
            module: module.name.to_owned(),
            arch: arch.to_owned(),
            log: log.to_string_lossy().into_owned(),
        }),
        Err(other) => Err(GpuError::Compile {
            module: module.name.to_owned(),
            arch: arch.to_owned(),
            log: format!("{other:?}"),
        }),
    }
}

/// The cache folder (created on demand; `None` when no home or cache dir can be found).
#[must_use]
pub(crate) fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("morphoscope"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("morphoscope"))
}

fn cache_path(module: &str, expanded_hash: u64, arch: &str, nvrtc: (i32, i32)) -> Option<PathBuf> {
    cache_dir().map(|d| {
        d.join(format!(
            "{module}-{expanded_hash:016x}-{arch}-nvrtc{}.{}.ptx",
            nvrtc.0, nvrtc.1
        ))
    })
}

/// Reads a cache entry; `None` when missing or corrupt.
fn read_cached(path: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let (first, rest) = text.split_once('\n')?;
    let sum = first.strip_prefix("// morphoscope-ptx ")?;
    let want = u64::from_str_radix(sum.trim(), 16).ok()?;
    (fnv1a64(rest.as_bytes()) == want).then(|| rest.to_owned())
}

fn write_cached(path: &std::path::Path, ptx: &str) {
    let body = format!("// morphoscope-ptx {:016x}\n{ptx}", fnv1a64(ptx.as_bytes()));
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    // Write to a temporary name then rename, so a crash never leaves a half entry in place.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, body).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Where a module's PTX came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PtxOrigin {
    /// Read from the disk cache.
    Cache,
    /// Compiled now (and written to the cache).
    Compiled,
}

/// PTX for a module, from the cache when a valid entry exists, else compiled and cached.
pub(crate) fn cached_ptx(
    module: &KernelSource,
    headers: &[(&str, &str)],
    arch: &str,
) -> Result<(String, PtxOrigin), GpuError> {
    let version = nvrtc_version()?;
    let expanded = expand_includes(module.name, module.source, headers)?;
    let path = cache_path(module.name, fnv1a64(expanded.as_bytes()), arch, version);
    if let Some(p) = &path
        && let Some(ptx) = read_cached(p)
    {
        return Ok((ptx, PtxOrigin::Cache));
    }
    let ptx = compile_ptx(module, headers, arch)?;
    if let Some(p) = &path {
        write_cached(p, &ptx);
    }
    Ok((ptx, PtxOrigin::Compiled))
}

/// Removes a cache entry (used when the driver rejects cached PTX).
pub(crate) fn evict(module: &KernelSource, headers: &[(&str, &str)], arch: &str) {
    if let (Ok(v), Ok(expanded)) = (
        nvrtc_version(),
        expand_includes(module.name, module.source, headers),
    ) && let Some(p) = cache_path(module.name, fnv1a64(expanded.as_bytes()), arch, v)
    {
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_expand_once_and_missing_ones_fail() {
        let headers = [("common/a.cuh", "int a;\n#include \"common/a.cuh\"\n")];
        let out = expand_includes("m", "#include \"common/a.cuh\"\nint b;\n", &headers).unwrap();
        assert_eq!(out.matches("int a;").count(), 1);
        assert!(out.contains("int b;"));
        assert!(expand_includes("m", "#include \"common/zz.cuh\"\n", &headers).is_err());
    }

    #[test]
    fn corrupt_cache_entries_are_ignored() {
        let dir = std::env::temp_dir().join(format!("mscache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.ptx");
        write_cached(&p, ".version 8.0\n");
        assert_eq!(read_cached(&p).as_deref(), Some(".version 8.0\n"));
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, text.replace("8.0", "9.9")).unwrap();
        assert_eq!(read_cached(&p), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
