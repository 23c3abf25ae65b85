//! The sample media folder, shared by the test crates of the workspace (the root package's
//! `gpu` and `cli` tests and the GStreamer element's tests include this file with `#[path]`).

use std::path::PathBuf;

/// Folder holding the sample media: `$MORPHOSCOPE_DATA/samples` on the device machine, else
/// `assets/samples` of the checkout (found from the including package's folder upwards, so the
/// element's tests find the workspace's samples too).
pub fn samples_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("MORPHOSCOPE_DATA") {
        let p = PathBuf::from(d).join("samples");
        if p.is_dir() {
            return p;
        }
    }
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .map(|d| d.join("assets").join("samples"))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| manifest.join("assets").join("samples"))
}
