//! `morphoscope image IN --op OP … --out OUT`: one image in, one result out. Reads PNG (8/16-bit
//! grey, RGB, RGBA), JPEG, TIFF, `.npy`; writes PNG, `.npy` or JSON by extension. Each analysis
//! adds its ops to [`OPS`] and to `run_op`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use morphoscope::backend::Backend;
use morphoscope::image::DynImage;
use morphoscope::io;
use morphoscope::ops::preprocess;

use super::CommonArgs;

/// The ops `image` knows, with a one-line description.
pub const OPS: &[(&str, &str)] = &[("gray", "colour to grey (BT.601, OpenCV rounding); 16-bit to 8-bit")];

/// Arguments of `image` (each op uses the options it needs and rejects missing ones).
#[derive(clap::Args, Debug)]
pub struct ImageArgs {
    /// Input image (PNG, JPEG, TIFF, .npy).
    pub input: PathBuf,
    /// The operation (see `--op help`).
    #[arg(long)]
    pub op: String,
    /// Output file (.png, .npy or .json depending on the op).
    #[arg(long)]
    pub out: PathBuf,
}

/// `morphoscope image`.
pub fn image(common: &CommonArgs, a: &ImageArgs) -> anyhow::Result<ExitCode> {
    if a.op == "help" {
        for (name, what) in OPS {
            println!("{name:<18} {what}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !OPS.iter().any(|(n, _)| *n == a.op) {
        let names: Vec<&str> = OPS.iter().map(|(n, _)| *n).collect();
        bail!("unknown op `{}` (one of: {})", a.op, names.join(", "));
    }
    let settings = common.settings()?;
    let img = io::read_image(&a.input)?;
    let backend = common.backend(&settings)?;
    let t = std::time::Instant::now();
    run_op(&backend, a, &img)?;
    log::info!("{} on {} ({}x{}) in {:.2} ms", a.op, backend.name(), img.size().0, img.size().1, t.elapsed().as_secs_f64() * 1e3);
    Ok(ExitCode::SUCCESS)
}

fn run_op(backend: &Backend, a: &ImageArgs, img: &DynImage) -> anyhow::Result<()> {
    match a.op.as_str() {
        "gray" => {
            let out = match (img, backend) {
                (DynImage::Rgb8(rgb), Backend::Cuda(g)) => preprocess::rgb_to_gray_gpu(g, rgb.view())?,
                (DynImage::Rgb8(rgb), Backend::Cpu) => preprocess::rgb_to_gray(rgb.view()),
                (DynImage::Gray8(g), _) => g.to_packed(),
                (DynImage::Gray16(g), _) => preprocess::gray16_to_gray8(g.view()),
                (DynImage::F32(_), _) => bail!("op gray: float input is not supported"),
            };
            io::write_image(&a.out, &DynImage::Gray8(out)).context("writing the result")?;
        }
        other => bail!("op `{other}` is not wired"),
    }
    Ok(())
}
