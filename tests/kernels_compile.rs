//! CI compile check: every embedded kernel module compiles with NVRTC for the target
//! architectures: the H100 (sm_90), Jetson Thor (sm_110), Jetson Orin (sm_87) and Jetson Xavier
//! (sm_72). Needs only libnvrtc (the PyPI wheels in CI), no GPU.
//!
//! NVRTC 13 no longer targets sm_72 and NVRTC 12 does not know sm_110, so CI runs this test
//! twice: with NVRTC 13 for sm_90, sm_110 and sm_87, and with NVRTC 12 for sm_72 (`MORPHOSCOPE_NVRTC_ARCHS` names the architectures of a
//! run; see `scripts/test.sh`). Architectures the loaded NVRTC does not support are skipped with
//! a message. Without NVRTC the test skips, unless `MORPHOSCOPE_REQUIRE_NVRTC=1` (set by CI),
//! which turns every skip into a failure.

use morphoscope::gpu::compile::{compile_ptx, nvrtc_present, nvrtc_version, supported_archs};
use morphoscope::kernels::{HEADERS, SOURCES};

fn required() -> bool {
    std::env::var("MORPHOSCOPE_REQUIRE_NVRTC").as_deref() == Ok("1")
}

fn wanted_archs() -> Vec<String> {
    std::env::var("MORPHOSCOPE_NVRTC_ARCHS")
        .unwrap_or_else(|_| "sm_90,sm_110,sm_87,sm_72".to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

#[test]
fn every_kernel_compiles_for_every_target() {
    if !nvrtc_present() {
        assert!(
            !required(),
            "MORPHOSCOPE_REQUIRE_NVRTC=1 but libnvrtc cannot be loaded (LD_LIBRARY_PATH?)"
        );
        eprintln!("skipped: libnvrtc not found (run scripts/setup.sh, then scripts/test.sh)");
        return;
    }
    let supported = supported_archs().unwrap();
    let version = nvrtc_version().unwrap();
    let mut failures = Vec::new();
    let mut compiled = 0;
    for arch in wanted_archs() {
        if !supported.contains(&arch) {
            assert!(
                !required(),
                "NVRTC {version:?} cannot target {arch} (supports {supported:?})"
            );
            eprintln!("skipped {arch}: NVRTC {version:?} does not support it");
            continue;
        }
        for module in SOURCES {
            match compile_ptx(module, HEADERS, &arch) {
                Ok(ptx) => {
                    compiled += 1;
                    for f in module.functions {
                        if !ptx.contains(&format!(".entry {f}(")) {
                            failures
                                .push(format!("{arch}: {}: entry point {f} missing", module.name));
                        }
                    }
                }
                Err(e) => failures.push(format!("{arch}: {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "kernel compile failures:\n{}",
        failures.join("\n")
    );
    eprintln!("compiled {compiled} module/arch pairs with NVRTC {version:?}");
}

#[test]
fn a_broken_kernel_reports_the_nvrtc_log() {
    if !nvrtc_present() {
        return;
    }
    let arch = supported_archs().unwrap().pop().unwrap();
    let bad = morphoscope::kernels::KernelSource {
        name: "broken",
        source: "extern \"C\" __global__ void k() { undeclared_thing = 1; }",
        functions: &["k"],
    };
    let err = compile_ptx(&bad, HEADERS, &arch).unwrap_err().to_string();
    assert!(
        err.contains("undeclared_thing"),
        "log should name the error: {err}"
    );
}

/// `segmentation_finish` (and `segmentation_finish_grid`) runs every step of a round in one kernel and reads what earlier steps wrote,
/// so it must not use the non-coherent load path (`ld.global.nc`, which the round kernels'
/// `const __restrict__` parameters allow): its pointers come from a plain struct, and this
/// checks that the compiler kept it that way, for every target.
#[test]
fn the_segmentation_finisher_uses_no_non_coherent_loads() {
    if !nvrtc_present() {
        assert!(
            !required(),
            "MORPHOSCOPE_REQUIRE_NVRTC=1 but libnvrtc cannot be loaded"
        );
        return;
    }
    let supported = supported_archs().unwrap();
    let Some(module) = SOURCES.iter().find(|m| m.name == "segmentation") else {
        panic!("no segment module")
    };
    for arch in wanted_archs().into_iter().filter(|a| supported.contains(a)) {
        let ptx = compile_ptx(module, HEADERS, &arch).unwrap();
        for kernel in ["segmentation_finish", "segmentation_finish_grid"] {
            let start = ptx
                .find(&format!(".entry {kernel}("))
                .unwrap_or_else(|| panic!("{kernel} in the PTX"));
            let body = &ptx[start..];
            let end = body.find("\n}\n").map_or(body.len(), |e| e + 3);
            let body = &body[..end];
            assert!(
                body.contains("ld.global"),
                "{arch}: no global loads found in {kernel}"
            );
            assert!(
                !body.contains("ld.global.nc"),
                "{arch}: {kernel} reads through the non-coherent path"
            );
        }
    }
}
