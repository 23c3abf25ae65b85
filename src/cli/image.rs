//! `morphoscope image IN --op OP … --out OUT`: one image in, one result out. Reads PNG (8/16-bit
//! grey, RGB, RGBA), JPEG, TIFF, `.npy`; writes PNG, `.npy` or JSON by extension. Colour input is
//! converted to grey (BT.601) for the grey-level ops. Output dtype = input dtype for the filters.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use morphoscope::backend::Backend;
use morphoscope::image::{DynImage, Image};
use morphoscope::io::{self, OutKind};
use morphoscope::ops::{ccl, linear_opening as lo, maxtree as mt, preprocess, segment};

use super::CommonArgs;

/// The ops `image` knows, with a one-line description.
pub const OPS: &[(&str, &str)] = &[
    ("gray", "colour to grey (BT.601, OpenCV rounding); 16-bit to 8-bit"),
    ("area-opening", "--area N [--connectivity 4|8]: removes bright components smaller than N (scikit-image area_opening)"),
    ("area-closing", "--area N [--connectivity 4|8]: removes dark components smaller than N (scikit-image area_closing)"),
    ("attribute-filter", "--attribute area|height|volume|bbox_width|bbox_height|diameter --threshold T --rule direct|min|max|subtractive --tree max|min [--connectivity] [--residue]"),
    ("label", "[--threshold T|otsu] [--dark] [--connectivity 4|8] --out stats.json [--labels labels.npy]: components with stats (OpenCV connectedComponentsWithStats)"),
    ("linear-opening", "--length L --angle DEG [--closing]: opening (closing) by a line segment"),
    ("orientation", "--length L --angles K [--closing] --out DIR: orientation.png, angle.npy, strength.npy, spectrum.csv"),
    ("felzenszwalb", "[--scale K] [--sigma S] [--min-size N] --out labels.npy [--overlay seg.png]: graph-based segmentation (scikit-image felzenszwalb)"),
];

/// Arguments of `image` (each op uses the options it needs and rejects missing ones).
#[derive(clap::Args, Debug)]
pub struct ImageArgs {
    /// Input image (PNG, JPEG, TIFF, .npy).
    pub input: PathBuf,
    /// The operation (`--op help` lists them).
    #[arg(long)]
    pub op: String,
    /// Output file (.png, .npy or .json depending on the op), or folder for `orientation`.
    #[arg(long)]
    pub out: PathBuf,
    /// Area threshold in pixels (area-opening, area-closing).
    #[arg(long)]
    pub area: Option<u64>,
    /// 4 or 8 (default: 4 for the max-tree ops, 8 for label).
    #[arg(long)]
    pub connectivity: Option<u32>,
    /// Attribute of attribute-filter.
    #[arg(long)]
    pub attribute: Option<String>,
    /// Threshold: attribute value (attribute-filter), grey level or `otsu` (label).
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
    /// label: foreground is `f <= T` instead of `f > T`.
    #[arg(long)]
    pub dark: bool,
    /// label: also write the label image (.npy, int32).
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
    /// felzenszwalb: observation scale (higher: larger segments).
    #[arg(long, default_value_t = 100.0)]
    pub scale: f64,
    /// felzenszwalb: Gaussian smoothing before the graph is built.
    #[arg(long, default_value_t = 0.8)]
    pub sigma: f64,
    /// felzenszwalb: smallest segment in pixels.
    #[arg(long, default_value_t = 20)]
    pub min_size: usize,
    /// felzenszwalb: also write the segments filled with their mean colour (PNG).
    #[arg(long)]
    pub overlay: Option<PathBuf>,
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
    run_op(&backend, a, img.clone())?;
    log::info!("{} on {} ({}x{}) in {:.2} ms", a.op, backend.name(), img.size().0, img.size().1, t.elapsed().as_secs_f64() * 1e3);
    Ok(ExitCode::SUCCESS)
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

fn write_filter_out(a: &ImageArgs, img: DynImage) -> anyhow::Result<()> {
    io::write_image(&a.out, &img).context("writing the result")
}

fn run_op(backend: &Backend, a: &ImageArgs, img: DynImage) -> anyhow::Result<()> {
    let op = a.op.as_str();
    match op {
        "gray" => {
            let out = match (img, backend) {
                (DynImage::Rgb8(rgb), Backend::Cuda(g)) => preprocess::rgb_to_gray_gpu(g, rgb.view())?,
                (DynImage::Rgb8(rgb), Backend::Cpu) => preprocess::rgb_to_gray(rgb.view()),
                (DynImage::Gray8(g), _) => g.into_packed(),
                (DynImage::Gray16(g), _) => preprocess::gray16_to_gray8(g.view()),
                (DynImage::F32(_), _) => bail!("op gray: float input is not supported"),
            };
            write_filter_out(a, DynImage::Gray8(out))
        }
        "area-opening" | "area-closing" | "attribute-filter" => maxtree_op(backend, a, gray_of(img)),
        "label" => label_op(backend, a, gray_of(img)),
        "linear-opening" => linear_opening_op(backend, a, gray_of(img)),
        "orientation" => orientation_op(backend, a, gray_of(img)),
        "felzenszwalb" => felzenszwalb_op(backend, a, img),
        other => bail!("op `{other}` is not wired"),
    }
}

fn maxtree_params(a: &ImageArgs) -> anyhow::Result<mt::MaxtreeParams> {
    let op = a.op.as_str();
    let connectivity = a.connectivity.unwrap_or(4);
    let p = match op {
        "area-opening" | "area-closing" => mt::MaxtreeParams {
            enabled: true,
            tree: if op == "area-opening" { mt::TreeKind::Max } else { mt::TreeKind::Min },
            attribute: mt::Attribute::Area,
            threshold: need(a.area, "--area N", op)? as f64,
            rule: mt::Rule::Direct,
            connectivity,
        },
        _ => {
            let toml_str = |s: &str| toml::Value::String(s.to_owned());
            let attribute: mt::Attribute = need(a.attribute.as_deref(), "--attribute", op)
                .and_then(|s| toml_str(s).try_into().with_context(|| format!("--attribute {s}: one of area, height, volume, bbox_width, bbox_height, diameter")))?;
            let rule: mt::Rule = toml_str(&a.rule).try_into().with_context(|| format!("--rule {}: one of direct, min, max, subtractive", a.rule))?;
            let tree: mt::TreeKind = toml_str(&a.tree).try_into().with_context(|| format!("--tree {}: max or min", a.tree))?;
            let t = need(a.threshold.as_deref(), "--threshold T", op)?;
            let threshold: f64 = t.parse().with_context(|| format!("--threshold {t}: a number"))?;
            mt::MaxtreeParams { enabled: true, tree, attribute, threshold, rule, connectivity }
        }
    };
    p.validate()?;
    Ok(p)
}

fn maxtree_op(backend: &Backend, a: &ImageArgs, g: Gray) -> anyhow::Result<()> {
    let p = maxtree_params(a)?;
    let (filtered, residue) = match (g, backend) {
        (Gray::U8(i), Backend::Cuda(gpu)) => {
            let o = mt::maxtree_gpu(gpu, i.view(), &p)?;
            (o.filtered, o.residue)
        }
        (Gray::U16(i), Backend::Cuda(gpu)) => {
            let o = mt::maxtree_gpu(gpu, i.view(), &p)?;
            (o.filtered, o.residue)
        }
        (Gray::U8(i), Backend::Cpu) => {
            let o = mt::attribute_filter(i.view(), &p)?;
            (DynImage::Gray8(o.filtered), DynImage::Gray8(o.residue))
        }
        (Gray::U16(i), Backend::Cpu) => {
            let o = mt::attribute_filter(i.view(), &p)?;
            (DynImage::Gray16(o.filtered), DynImage::Gray16(o.residue))
        }
        (Gray::F32(_), _) => bail!("op {}: float input is not supported (8 or 16-bit)", a.op),
    };
    write_filter_out(a, if a.residue { residue } else { filtered })
}

fn label_op(backend: &Backend, a: &ImageArgs, g: Gray) -> anyhow::Result<()> {
    io::out_kind(&a.out, &[OutKind::Json])?;
    let threshold: ccl::Threshold = match a.threshold.as_deref() {
        Some(t) => t.parse()?,
        None => ccl::Threshold::Otsu,
    };
    let p = ccl::CclParams {
        threshold,
        polarity: if a.dark { ccl::Polarity::Dark } else { ccl::Polarity::Bright },
        connectivity: u8::try_from(a.connectivity.unwrap_or(8)).unwrap_or(0),
        source: ccl::Source::Frame,
        learning_rate: 0.05,
    };
    p.validate()?;
    let out = match (g, backend) {
        (Gray::U8(i), Backend::Cuda(gpu)) => ccl::ccl_gpu(gpu, i.view(), &p)?,
        (Gray::U8(i), Backend::Cpu) => ccl::ccl_cpu(i.view(), &p)?,
        (Gray::U16(i), backend) => {
            if matches!(backend, Backend::Cuda(_)) {
                log::info!("label: 16-bit input runs on the CPU (the GPU labeling takes 8-bit frames)");
            }
            ccl::ccl_cpu(i.view(), &p)?
        }
        (Gray::F32(_), _) => bail!("op label: float input is not supported (8 or 16-bit)"),
    };
    io::write_json(&a.out, &out.table)?;
    if let Some(l) = &a.labels {
        io::out_kind(l, &[OutKind::Npy])?;
        let labels = out.labels.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
        io::write_npy(l, &labels)?;
    }
    println!("{} components (threshold {})", out.table.components.len(), out.table.threshold);
    Ok(())
}

fn linear_opening_op(backend: &Backend, a: &ImageArgs, g: Gray) -> anyhow::Result<()> {
    let p = lo::LinearOpeningParams { length: need(a.length, "--length L", "linear-opening")?, angle: need(a.angle, "--angle DEG", "linear-opening")?, closing: a.closing };
    p.validate()?;
    let out = match (g, backend) {
        (Gray::U8(i), Backend::Cuda(gpu)) => DynImage::Gray8(lo::linear_opening_gpu(gpu, i.view(), &p)?),
        (Gray::U16(i), Backend::Cuda(gpu)) => DynImage::Gray16(lo::linear_opening_gpu(gpu, i.view(), &p)?),
        (Gray::U8(i), Backend::Cpu) => DynImage::Gray8(lo::linear_opening(i.view(), &p)?),
        (Gray::U16(i), Backend::Cpu) => DynImage::Gray16(lo::linear_opening(i.view(), &p)?),
        (Gray::F32(i), _) => DynImage::F32(lo::linear_opening(i.view(), &p)?),
    };
    write_filter_out(a, out)
}

fn orientation_op(backend: &Backend, a: &ImageArgs, g: Gray) -> anyhow::Result<()> {
    let p = lo::OrientationParams {
        enabled: true,
        length: need(a.length, "--length L", "orientation")?,
        angles: need(a.angles, "--angles K", "orientation")?,
        angle_list: Vec::new(),
        closing: a.closing,
    };
    p.validate()?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let d = &a.out;
    let (colour, angle, spectrum, dominant) = match (g, backend) {
        (Gray::U8(i), Backend::Cuda(gpu)) => {
            let o = lo::orientation_gpu(gpu, i.view(), &p)?;
            io::write_npy(&d.join("strength.npy"), &o.strength)?;
            (o.colour(), o.angle_map_deg(), o.spectrum_csv(), o.summary())
        }
        (Gray::U16(i), Backend::Cuda(gpu)) => {
            let o = lo::orientation_gpu(gpu, i.view(), &p)?;
            io::write_npy(&d.join("strength.npy"), &o.strength)?;
            (o.colour(), o.angle_map_deg(), o.spectrum_csv(), o.summary())
        }
        (Gray::U8(i), Backend::Cpu) => {
            let o = lo::orientation(i.view(), &p)?;
            io::write_npy(&d.join("strength.npy"), &o.strength)?;
            (o.colour(), o.angle_map_deg(), o.spectrum_csv(), o.summary())
        }
        (Gray::U16(i), Backend::Cpu) => {
            let o = lo::orientation(i.view(), &p)?;
            io::write_npy(&d.join("strength.npy"), &o.strength)?;
            (o.colour(), o.angle_map_deg(), o.spectrum_csv(), o.summary())
        }
        (Gray::F32(i), _) => {
            let o = lo::orientation(i.view(), &p)?;
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

fn felzenszwalb_op(backend: &Backend, a: &ImageArgs, img: DynImage) -> anyhow::Result<()> {
    io::out_kind(&a.out, &[OutKind::Npy])?;
    if let Some(o) = &a.overlay {
        io::out_kind(o, &[OutKind::Png])?;
    }
    let p = segment::SegmentParams { scale: a.scale, sigma: a.sigma, min_size: a.min_size, ..Default::default() };
    p.validate()?;
    let img = match img {
        DynImage::Gray16(g) => {
            log::info!("felzenszwalb: 16-bit input is reduced to 8 bits (high byte) before segmenting");
            DynImage::Gray8(preprocess::gray16_to_gray8(g.view()))
        }
        DynImage::F32(_) => bail!("op felzenszwalb: float input is not supported (8-bit grey or RGB, or 16-bit grey)"),
        other => other,
    };
    let out = match (&img, backend) {
        (DynImage::Rgb8(c), Backend::Cuda(gpu)) => segment::segment_gpu_rgb(gpu, c.view(), &p)?,
        (DynImage::Rgb8(c), Backend::Cpu) => segment::felzenszwalb_rgb(c.view(), &p)?,
        (DynImage::Gray8(g), Backend::Cuda(gpu)) => segment::segment_gpu(gpu, g.view(), &p)?,
        (DynImage::Gray8(g), Backend::Cpu) => segment::felzenszwalb(g.view(), &p)?,
        _ => bail!("op felzenszwalb: unsupported input"),
    };
    let labels = out.labels.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
    io::write_npy(&a.out, &labels)?;
    if let Some(path) = &a.overlay {
        let boundary = Some([255, 255, 0]);
        let picture = match &img {
            DynImage::Gray8(g) => segment::overlay_segments_gray(g.view(), &out, segment::OverlayMode::Mean, boundary)?,
            DynImage::Rgb8(c) => segment::overlay_segments_rgb(c.view(), &out, segment::OverlayMode::Mean, boundary)?,
            _ => bail!("op felzenszwalb: unsupported input"),
        };
        io::write_image(path, &DynImage::Rgb8(picture))?;
    }
    if out.capped {
        log::warn!("felzenszwalb: the GPU round cap was reached; the result merges less than the exact one");
    }
    println!("{} segments", out.segment_count);
    Ok(())
}
