//! `morphoscope devices`: the backends available here. Exit 0 either way.

use std::process::ExitCode;

use morphoscope::gpu::{compile, context};

/// Prints CPU threads and every CUDA device (or why there is none).
pub fn devices() -> anyhow::Result<ExitCode> {
    println!("cpu: {} threads (rayon)", rayon::current_num_threads());
    match compile::nvrtc_version() {
        Ok((a, b)) => println!("nvrtc: {a}.{b}"),
        Err(e) => println!("nvrtc: unavailable ({e})"),
    }
    match context::driver_version() {
        Ok((a, b)) => println!("cuda driver: {a}.{b}"),
        Err(e) => {
            println!("cuda: unavailable ({e})");
            return Ok(ExitCode::SUCCESS);
        }
    }
    match context::device_count() {
        Ok(0) => println!("cuda: driver present but no device"),
        Ok(n) => {
            for i in 0..n {
                match context::open_context(i) {
                    Ok((_, info)) => println!(
                        "cuda:{i}: {} | compute capability {}.{} ({}) | {} SMs | {:.1} GiB{}",
                        info.name,
                        info.compute_capability.0,
                        info.compute_capability.1,
                        info.arch(),
                        info.multiprocessors,
                        info.total_memory_bytes as f64 / f64::from(1u32 << 30),
                        if info.integrated { " | integrated" } else { "" }
                    ),
                    Err(e) => println!("cuda:{i}: cannot open ({e})"),
                }
            }
        }
        Err(e) => println!("cuda: unavailable ({e})"),
    }
    Ok(ExitCode::SUCCESS)
}
