//! `morphoscope image IN --op OP … --out OUT`: one image in, one result out. Reads PNG (8/16-bit
//! grey, RGB, RGBA), JPEG, TIFF, `.npy`; writes PNG, `.npy` or JSON by extension. Colour input is
//! converted to grey (BT.601) for the grey-level ops. Output dtype = input dtype for the filters.
//!
//! `--op help` lists the ops and `--op NAME --help` shows one, with nothing else on the line.
//! Output paths are checked (extension, folder) before the input is read, so a typo costs
//! nothing on a large image.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use morphoscope::backend::Backend;
use morphoscope::image::{DynImage, Image};
use morphoscope::io::{self, OutKind};
use morphoscope::ops::{cca, maxtree, orientation, preprocess, segmentation};

use super::CommonArgs;

/// The ops of this command that are whole analyses take the analysis' name.
const CCA: &str = morphoscope::analysis::cca::DESCRIPTOR.name;
/// See [`CCA`].
const ORIENTATION: &str = morphoscope::analysis::orientation::DESCRIPTOR.name;
/// See [`CCA`].
const SEGMENTATION: &str = morphoscope::analysis::segmentation::DESCRIPTOR.name;

/// The ops `image` knows, with a one-line description.
pub const OPS: &[(&str, &str)] = &[
    (
        "gray",
        "colour to grey (BT.601, OpenCV rounding); 16-bit to 8-bit",
    ),
    (
        "area-opening",
        "--area N [--connectivity 4|8]: removes bright components smaller than N (scikit-image area_opening)",
    ),
    (
        "area-closing",
        "--area N [--connectivity 4|8]: removes dark components smaller than N (scikit-image area_closing)",
    ),
    (
        "attribute-filter",
        "--attribute area|height|volume|bbox_width|bbox_height|diameter|diagonal --threshold T --rule direct|min|max|subtractive --tree max|min [--connectivity] [--residue]",
    ),
    (
        CCA,
        "[--threshold T|otsu] [--dark] [--connectivity 4|8] --out stats.json [--labels labels.npy]: components with stats (OpenCV connectedComponentsWithStats)",
    ),
    (
        "linear-opening",
        "--length L --angle DEG [--closing]: opening (closing) by a line segment",
    ),
    (
        ORIENTATION,
        "--length L --angles K [--closing] --out DIR: orientation.png, angle.npy, strength.npy, spectrum.csv",
    ),
    (
        SEGMENTATION,
        "[--scale K] [--sigma S] [--min-size N] --out labels.npy [--overlay seg.png]: graph-based segmentation (scikit-image felzenszwalb)",
    ),
];

/// The op names of earlier versions, each with the analysis name that replaced it.
const RENAMED_OPS: &[(&str, &str)] = &[("label", CCA), ("felzenszwalb", SEGMENTATION)];

/// `asked`, or the current name of an op renamed since (with a deprecation warning).
fn renamed_op(asked: &str) -> &str {
    match RENAMED_OPS.iter().find(|(old, _)| *old == asked) {
        Some((old, new)) => {
            log::warn!("image --op {old} is deprecated: it is now --op {new}");
            new
        }
        None => asked,
    }
}

/// What each op writes with `--out` (and its other outputs).
const OUTPUTS: &[(&str, &str)] = &[
    ("gray", "--out OUT.png|.npy"),
    ("area-opening", "--out OUT.png|.npy"),
    ("area-closing", "--out OUT.png|.npy"),
    ("attribute-filter", "--out OUT.png|.npy"),
    (CCA, "--out STATS.json [--labels LABELS.npy]"),
    (
        "linear-opening",
        "--out OUT.png|.npy (.npy for float input)",
    ),
    (ORIENTATION, "--out FOLDER"),
    (SEGMENTATION, "--out LABELS.npy [--overlay SEGMENTS.png]"),
];

/// Arguments of `image` (each op uses the options it needs and rejects missing ones).
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct ImageArgs {
    /// Input image (PNG, JPEG, TIFF, .npy).
    pub input: Option<PathBuf>,
    /// The operation (`--op help` lists them; `--op NAME --help` shows one).
    #[arg(long)]
    pub op: Option<String>,
    /// Output file (.png, .npy or .json depending on the op), or folder for `orientation`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Help: of the op given with `--op`, else of `image`.
    #[arg(short, long)]
    pub help: bool,
    /// Area threshold in pixels (area-opening, area-closing).
    #[arg(long)]
    pub area: Option<u64>,
    /// 4 or 8 (default: 4 for the max-tree ops, 8 for cca).
    #[arg(long)]
    pub connectivity: Option<u32>,
    /// Attribute of attribute-filter.
    #[arg(long)]
    pub attribute: Option<String>,
    /// Threshold: attribute value (attribute-filter), grey level or `otsu` (cca).
    #[arg(long)]
    pub threshold: Option<String>,
    /// Restitution rule of attribute-filter.
    #[arg(long, default_value = "direct")]
    pub rule: String,
    /// Tree of attribute-filter: max (bright structures) or min (dark structures).
    #[arg(long, default_value = "max")]
    pub tree: String,
    /// Write the residue (|input − filtered|) instead of the filtered image.
    #[arg(long)]
    pub residue: bool,
    /// cca: foreground is `f <= T` instead of `f > T`.
    #[arg(long)]
    pub dark: bool,
    /// cca: also write the label image (.npy, int32).
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Segment length in pixels (odd).
    #[arg(long)]
    pub length: Option<u32>,
    /// Segment angle in degrees (linear-opening).
    #[arg(long)]
    pub angle: Option<f64>,
    /// Number of angles over [0, 180) (orientation).
    #[arg(long)]
    pub angles: Option<u32>,
    /// Closing instead of opening (linear-opening, orientation).
    #[arg(long)]
    pub closing: bool,
    /// segmentation: observation scale (higher: larger segments).
    #[arg(long, default_value_t = 100.0)]
    pub scale: f64,
    /// segmentation: Gaussian smoothing before the graph is built.
    #[arg(long, default_value_t = 0.8)]
    pub sigma: f64,
    /// segmentation: smallest segment in pixels.
    #[arg(long, default_value_t = 20)]
    pub min_size: usize,
    /// segmentation: also write the segments filled with their mean colour (PNG).
    #[arg(long)]
    pub overlay: Option<PathBuf>,
}

/// `morphoscope image`.
pub fn image(common: &CommonArgs, a: &ImageArgs) -> anyhow::Result<ExitCode> {
    let op = match (a.op.as_deref(), a.help) {
        (Some("help"), _) => {
            for (name, what) in OPS {
                println!("{name:<18} {what}");
            }
            println!("\n`morphoscope image --op NAME --help` shows one op with its outputs.");
            return Ok(ExitCode::SUCCESS);
        }
        (None, true) => {
            let about =
                "One image in, one result out: morphoscope image IN --op OP [op options] --out OUT";
            let mut cmd = <ImageArgs as clap::Args>::augment_args(
                clap::Command::new("morphoscope image").about(about),
            );
            cmd.print_long_help()?;
            return Ok(ExitCode::SUCCESS);
        }
        (None, false) => bail!("image needs --op OP (`morphoscope image --op help` lists them)"),
        (Some(asked), help) => {
            let op = renamed_op(asked);
            let Some((name, what)) = OPS.iter().find(|(n, _)| *n == op) else {
                let names: Vec<&str> = OPS.iter().map(|(n, _)| *n).collect();
                bail!("unknown op `{op}` (one of: {})", names.join(", "));
            };
            if help {
                let outputs = OUTPUTS
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or("--out OUT", |(_, o)| o);
                println!("morphoscope image IN --op {name} {outputs}\n  {what}");
                return Ok(ExitCode::SUCCESS);
            }
            *name
        }
    };
    let input = a
        .input
        .as_deref()
        .with_context(|| format!("image --op {op} needs an input image"))?;
    let out = a.out.as_deref().with_context(|| {
        format!(
            "image --op {op} needs --out ({})",
            OUTPUTS
                .iter()
                .find(|(n, _)| *n == op)
                .map_or("", |(_, o)| o)
        )
    })?;
    check_outputs(op, a, out)?;
    let settings = common.settings()?;
    let img = io::read_image(input)?;
    if matches!(img, DynImage::F32(_))
        && io::out_kind(out, &[OutKind::Png]).is_ok()
        && op != ORIENTATION
    {
        bail!(
            "{}: float input gives a float result; write it as .npy",
            out.display()
        );
    }
    let backend = common.backend(&settings)?;
    let t = std::time::Instant::now();
    let size = img.size();
    run_op(&backend, op, out, a, img)?;
    log::info!(
        "{op} on {} ({}x{}) in {:.2} ms",
        backend.name(),
        size.0,
        size.1,
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(ExitCode::SUCCESS)
}

/// Checks the output paths of `op` before any work: extensions, and that the folder they go
/// into is (or can become) a folder.
fn check_outputs(op: &str, a: &ImageArgs, out: &Path) -> anyhow::Result<()> {
    let file = |p: &Path, kinds: &[OutKind]| -> anyhow::Result<()> {
        io::out_kind(p, kinds).with_context(|| format!("--out {}", p.display()))?;
        if p.is_dir() {
            bail!("{} is a folder; give a file name", p.display());
        }
        if let Some(parent) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            folder(parent)?;
        }
        Ok(())
    };
    match op {
        CCA => {
            file(out, &[OutKind::Json])?;
            if let Some(l) = &a.labels {
                file(l, &[OutKind::Npy])?;
            }
        }
        ORIENTATION => folder(out)?,
        SEGMENTATION => {
            file(out, &[OutKind::Npy])?;
            if let Some(o) = &a.overlay {
                file(o, &[OutKind::Png])?;
            }
        }
        _ => file(out, &[OutKind::Png, OutKind::Npy])?,
    }
    Ok(())
}

/// `dir` is a folder, or can be created: no part of it is a file.
fn folder(dir: &Path) -> anyhow::Result<()> {
    if let Some(blocking) = dir.ancestors().find(|p| p.exists() && !p.is_dir()) {
        bail!(
            "cannot write into {}: {} is a file, not a folder",
            dir.display(),
            blocking.display()
        );
    }
    Ok(())
}

/// Grey input of the grey-level ops: colour is converted, 8/16-bit kept, float only where
/// supported.
enum Gray {
    U8(Image<u8>),
    U16(Image<u16>),
    F32(Image<f32>),
}

fn gray_of(img: DynImage) -> Gray {
    match img {
        DynImage::Rgb8(c) => Gray::U8(preprocess::rgb_to_gray(c.view())),
        DynImage::Gray8(g) => Gray::U8(g),
        DynImage::Gray16(g) => Gray::U16(g),
        DynImage::F32(f) => Gray::F32(f),
    }
}

fn need<T: Copy>(v: Option<T>, opt: &str, op: &str) -> anyhow::Result<T> {
    v.with_context(|| format!("op {op} needs {opt}"))
}

fn write_filter_out(out: &Path, img: DynImage) -> anyhow::Result<()> {
    io::write_image(out, &img).context("writing the result")
}

fn run_op(
    backend: &Backend,
    op: &str,
    out_path: &Path,
    a: &ImageArgs,
    img: DynImage,
) -> anyhow::Result<()> {
    match op {
        "gray" => {
            let out = match (img, backend) {
                (DynImage::Rgb8(rgb), Backend::Cuda(g)) => {
                    preprocess::rgb_to_gray_gpu(g, rgb.view())?
                }
                (DynImage::Rgb8(rgb), Backend::Cpu) => preprocess::rgb_to_gray(rgb.view()),
                (DynImage::Gray8(g), _) => g.into_packed(),
                (DynImage::Gray16(g), _) => preprocess::gray16_to_gray8(g.view()),
                (DynImage::F32(_), _) => bail!("op gray: float input is not supported"),
            };
            write_filter_out(out_path, DynImage::Gray8(out))
        }
        "area-opening" | "area-closing" | "attribute-filter" => {
            maxtree_op(backend, op, out_path, a, gray_of(img))
        }
        CCA => cca_op(backend, out_path, a, gray_of(img)),
        "linear-opening" => linear_opening_op(backend, out_path, a, gray_of(img)),
        ORIENTATION => orientation_op(backend, out_path, a, gray_of(img)),
        SEGMENTATION => segmentation_op(backend, out_path, a, img),
        other => bail!("op `{other}` is not wired"),
    }
}

fn maxtree_params(op: &str, a: &ImageArgs) -> anyhow::Result<maxtree::MaxTreeParams> {
    let connectivity = a.connectivity.unwrap_or(4);
    let p = match op {
        "area-opening" | "area-closing" => maxtree::MaxTreeParams {
            enabled: true,
            tree: if op == "area-opening" {
                maxtree::TreeKind::Max
            } else {
                maxtree::TreeKind::Min
            },
            attribute: maxtree::Attribute::Area,
            threshold: need(a.area, "--area N", op)? as f64,
            rule: maxtree::Rule::Direct,
            connectivity,
        },
        _ => {
            let toml_str = |s: &str| toml::Value::String(s.to_owned());
            let attribute: maxtree::Attribute = need(a.attribute.as_deref(), "--attribute", op)
                .and_then(|s| toml_str(s).try_into().with_context(|| format!("--attribute {s}: one of area, height, volume, bbox_width, bbox_height, diameter, diagonal")))?;
            let rule: maxtree::Rule = toml_str(&a.rule).try_into().with_context(|| {
                format!("--rule {}: one of direct, min, max, subtractive", a.rule)
            })?;
            let tree: maxtree::TreeKind = toml_str(&a.tree)
                .try_into()
                .with_context(|| format!("--tree {}: max or min", a.tree))?;
            let t = need(a.threshold.as_deref(), "--threshold T", op)?;
            let threshold: f64 = t
                .parse()
                .with_context(|| format!("--threshold {t}: a number"))?;
            maxtree::MaxTreeParams {
                enabled: true,
                tree,
                attribute,
                threshold,
                rule,
                connectivity,
            }
        }
    };
    p.validate()?;
    Ok(p)
}

fn maxtree_op(
    backend: &Backend,
    op: &str,
    out: &Path,
    a: &ImageArgs,
    g: Gray,
) -> anyhow::Result<()> {
    let p = maxtree_params(op, a)?;
    let (filtered, residue) = match (g, backend) {
        (Gray::U8(i), Backend::Cuda(gpu)) => {
            let o = maxtree::maxtree_gpu(gpu, i.view(), &p)?;
            (o.filtered, o.residue)
        }
        (Gray::U16(i), Backend::Cuda(gpu)) => {
            let o = maxtree::maxtree_gpu(gpu, i.view(), &p)?;
            (o.filtered, o.residue)
        }
        (Gray::U8(i), Backend::Cpu) => {
            let o = maxtree::attribute_filter(i.view(), &p)?;
            (DynImage::Gray8(o.filtered), DynImage::Gray8(o.residue))
        }
        (Gray::U16(i), Backend::Cpu) => {
            let o = maxtree::attribute_filter(i.view(), &p)?;
            (DynImage::Gray16(o.filtered), DynImage::Gray16(o.residue))
        }
        (Gray::F32(_), _) => bail!("op {op}: float input is not supported (8 or 16-bit)"),
    };
    write_filter_out(out, if a.residue { residue } else { filtered })
}

fn cca_op(backend: &Backend, out_path: &Path, a: &ImageArgs, g: Gray) -> anyhow::Result<()> {
    let threshold: cca::Threshold = match a.threshold.as_deref() {
        Some(t) => t.parse()?,
        None => cca::Threshold::Otsu,
    };
    let p = cca::CcaParams {
        threshold,
        polarity: if a.dark {
            cca::Polarity::Dark
        } else {
            cca::Polarity::Bright
        },
        connectivity: u8::try_from(a.connectivity.unwrap_or(8)).unwrap_or(0),
        source: cca::Source::Frame,
        learning_rate: 0.05,
    };
    p.validate()?;
    let out = match (g, backend) {
        (Gray::U8(i), Backend::Cuda(gpu)) => cca::cca_gpu(gpu, i.view(), &p)?,
        (Gray::U8(i), Backend::Cpu) => cca::cca_cpu(i.view(), &p)?,
        (Gray::U16(i), backend) => {
            if matches!(backend, Backend::Cuda(_)) {
                log::info!(
                    "cca: 16-bit input runs on the CPU (the GPU labeling takes 8-bit frames)"
                );
            }
            cca::cca_cpu(i.view(), &p)?
        }
        (Gray::F32(_), _) => bail!("op cca: float input is not supported (8 or 16-bit)"),
    };
    io::write_json(out_path, &out.table)?;
    if let Some(l) = &a.labels {
        let labels = out.labels.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
        io::write_npy(l, &labels)?;
    }
    println!(
        "{} components (threshold {})",
        out.table.components.len(),
        out.table.threshold
    );
    Ok(())
}

fn linear_opening_op(
    backend: &Backend,
    out_path: &Path,
    a: &ImageArgs,
    g: Gray,
) -> anyhow::Result<()> {
    let p = orientation::LinearOpeningParams {
        length: need(a.length, "--length L", "linear-opening")?,
        angle: need(a.angle, "--angle DEG", "linear-opening")?,
        closing: a.closing,
    };
    p.validate()?;
    let out = match (g, backend) {
        (Gray::U8(i), Backend::Cuda(gpu)) => {
            DynImage::Gray8(orientation::linear_opening_gpu(gpu, i.view(), &p)?)
        }
        (Gray::U16(i), Backend::Cuda(gpu)) => {
            DynImage::Gray16(orientation::linear_opening_gpu(gpu, i.view(), &p)?)
        }
        (Gray::U8(i), Backend::Cpu) => DynImage::Gray8(orientation::linear_opening(i.view(), &p)?),
        (Gray::U16(i), Backend::Cpu) => {
            DynImage::Gray16(orientation::linear_opening(i.view(), &p)?)
        }
        (Gray::F32(i), _) => DynImage::F32(orientation::linear_opening(i.view(), &p)?),
    };
    write_filter_out(out_path, out)
}

fn orientation_op(backend: &Backend, out: &Path, a: &ImageArgs, g: Gray) -> anyhow::Result<()> {
    let p = orientation::OrientationParams {
        enabled: true,
        length: need(a.length, "--length L", ORIENTATION)?,
        angles: need(a.angles, "--angles K", ORIENTATION)?,
        angle_list: Vec::new(),
        closing: a.closing,
    };
    p.validate()?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let d = out;
    let (colour, angle, spectrum, dominant) = match (g, backend) {
        (Gray::U8(i), Backend::Cuda(gpu)) => {
            let o = orientation::orientation_gpu(gpu, i.view(), &p)?;
            io::write_npy(&d.join("strength.npy"), &o.strength)?;
            (o.colour(), o.angle_map_deg(), o.spectrum_csv(), o.summary())
        }
        (Gray::U16(i), Backend::Cuda(gpu)) => {
            let o = orientation::orientation_gpu(gpu, i.view(), &p)?;
            io::write_npy(&d.join("strength.npy"), &o.strength)?;
            (o.colour(), o.angle_map_deg(), o.spectrum_csv(), o.summary())
        }
        (Gray::U8(i), Backend::Cpu) => {
            let o = orientation::orientation(i.view(), &p)?;
            io::write_npy(&d.join("strength.npy"), &o.strength)?;
            (o.colour(), o.angle_map_deg(), o.spectrum_csv(), o.summary())
        }
        (Gray::U16(i), Backend::Cpu) => {
            let o = orientation::orientation(i.view(), &p)?;
            io::write_npy(&d.join("strength.npy"), &o.strength)?;
            (o.colour(), o.angle_map_deg(), o.spectrum_csv(), o.summary())
        }
        (Gray::F32(i), _) => {
            let o = orientation::orientation(i.view(), &p)?;
            io::write_npy(&d.join("strength.npy"), &o.strength)?;
            (o.colour(), o.angle_map_deg(), o.spectrum_csv(), o.summary())
        }
    };
    io::write_image(&d.join("orientation.png"), &DynImage::Rgb8(colour))?;
    io::write_npy(&d.join("angle.npy"), &angle)?;
    std::fs::write(d.join("spectrum.csv"), spectrum).with_context(|| "writing spectrum.csv")?;
    println!("dominant angle: {} deg", dominant["dominant_angle_deg"]);
    Ok(())
}

fn segmentation_op(
    backend: &Backend,
    out_path: &Path,
    a: &ImageArgs,
    img: DynImage,
) -> anyhow::Result<()> {
    let p = segmentation::SegmentationParams {
        scale: a.scale,
        sigma: a.sigma,
        min_size: a.min_size,
        ..Default::default()
    };
    p.validate()?;
    let img = match img {
        DynImage::Gray16(g) => {
            log::info!(
                "segmentation: 16-bit input is reduced to 8 bits (high byte) before segmenting"
            );
            DynImage::Gray8(preprocess::gray16_to_gray8(g.view()))
        }
        DynImage::F32(_) => bail!(
            "op segmentation: float input is not supported (8-bit grey or RGB, or 16-bit grey)"
        ),
        other => other,
    };
    let out = match (&img, backend) {
        (DynImage::Rgb8(c), Backend::Cuda(gpu)) => {
            segmentation::segment_gpu_rgb(gpu, c.view(), &p)?
        }
        (DynImage::Rgb8(c), Backend::Cpu) => segmentation::felzenszwalb_rgb(c.view(), &p)?,
        (DynImage::Gray8(g), Backend::Cuda(gpu)) => segmentation::segment_gpu(gpu, g.view(), &p)?,
        (DynImage::Gray8(g), Backend::Cpu) => segmentation::felzenszwalb(g.view(), &p)?,
        _ => bail!("op segmentation: unsupported input"),
    };
    let labels = out.labels.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
    io::write_npy(out_path, &labels)?;
    if let Some(path) = &a.overlay {
        let boundary = Some([255, 255, 0]);
        let picture = match &img {
            DynImage::Gray8(g) => segmentation::overlay_segments_gray(
                g.view(),
                &out,
                segmentation::OverlayMode::Mean,
                boundary,
            )?,
            DynImage::Rgb8(c) => segmentation::overlay_segments_rgb(
                c.view(),
                &out,
                segmentation::OverlayMode::Mean,
                boundary,
            )?,
            _ => bail!("op segmentation: unsupported input"),
        };
        io::write_image(path, &DynImage::Rgb8(picture))?;
    }
    if out.capped {
        log::warn!(
            "felzenszwalb: the GPU round cap was reached; the result merges less than the exact one"
        );
    }
    println!("{} segments", out.segment_count);
    Ok(())
}
