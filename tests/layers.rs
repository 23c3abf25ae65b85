//! The library's modules form layers without cycles: a module may use the modules of the layers
//! below its own, never one of its own layer or above. The layers are the numbered list under
//! "## Layers" in ARCHITECTURE.md (each line names its modules in backticks, lowest first), so
//! the document and the code cannot drift apart: this test reads that list, then every
//! `crate::<module>` path in `src/**/*.rs` outside comments, and fails on a path that reaches
//! up or sideways, on a top-level module the list does not place, and on a listed module that
//! does not exist. The binary's command line (`src/cli`, `src/main.rs`) sits above them all.

#![allow(clippy::expect_used)] // helpers outside #[test] fns (clippy.toml allows them inside)

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The layers of ARCHITECTURE.md, lowest first: module name → layer number.
fn documented_layers(root: &Path) -> BTreeMap<String, usize> {
    let text = fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md reads");
    let section = text
        .split("\n## Layers")
        .nth(1)
        .expect("ARCHITECTURE.md has a \"## Layers\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut layers = BTreeMap::new();
    let mut layer = 0;
    for line in section.lines() {
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        layer += 1;
        let named = rest.split(" — ").next().unwrap_or(rest);
        for module in named.split('`').skip(1).step_by(2) {
            let previous = layers.insert(module.to_owned(), layer);
            assert!(previous.is_none(), "`{module}` is listed twice");
        }
    }
    assert!(layer > 1, "no numbered layers under \"## Layers\"");
    layers
}

/// The library's top-level modules (`src/<m>.rs` or `src/<m>/`), without the binary's.
fn top_level_modules(src: &Path) -> Vec<String> {
    let mut modules: Vec<String> = fs::read_dir(src)
        .expect("src/ lists")
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            if path.is_dir() {
                Some(name)
            } else {
                name.strip_suffix(".rs").map(str::to_owned)
            }
        })
        .filter(|m| !matches!(m.as_str(), "lib" | "main" | "cli"))
        .collect();
    modules.sort();
    modules
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir)
        .expect("a source folder lists")
        .filter_map(Result::ok)
    {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules a line of code names through `crate::` (`crate::a::…` and `crate::{a, b::…}`),
/// ignoring what follows `//`.
fn named_modules(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut names = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = group.split('}').next().unwrap_or(group);
            names.extend(group.split(',').filter_map(|item| {
                let first = item.trim().split("::").next().unwrap_or("").trim();
                (!first.is_empty() && first != "self").then(|| first.to_owned())
            }));
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.push(name);
            }
        }
    }
    names
}

#[test]
fn architecture_lists_every_module_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layers = documented_layers(root);
    let modules = top_level_modules(&root.join("src"));
    let unplaced: Vec<&String> = modules
        .iter()
        .filter(|m| !layers.contains_key(*m))
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules with no layer in ARCHITECTURE.md: {unplaced:?}"
    );
    let missing: Vec<&String> = layers.keys().filter(|m| !modules.contains(m)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md lists modules that do not exist: {missing:?}"
    );
}

#[test]
fn no_module_uses_its_own_layer_or_one_above() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let layers = documented_layers(root);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src/");
        let first = relative.components().next().expect("a first component");
        let first = first.as_os_str().to_string_lossy();
        let module = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
        let Some(&own) = layers.get(&module) else {
            continue; // lib.rs, main.rs and the command line sit above every layer
        };
        let text = fs::read_to_string(file).expect("a source file reads");
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for used in named_modules(line) {
                if used == module {
                    continue;
                }
                match layers.get(&used) {
                    Some(&layer) if layer < own => {}
                    Some(&layer) => wrong.push(format!(
                        "{}:{}: `{module}` (layer {own}) uses `{used}` (layer {layer})",
                        relative.display(),
                        n + 1
                    )),
                    None => wrong.push(format!(
                        "{}:{}: `{used}` is not a listed module",
                        relative.display(),
                        n + 1
                    )),
                }
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn the_line_reader_finds_grouped_and_plain_paths() {
    assert_eq!(
        named_modules("use crate::{gpu::GpuContext, ops, self};"),
        ["gpu", "ops"]
    );
    assert_eq!(
        named_modules("    let x = crate::image::Image::new(1, 1, 0); // crate::ui"),
        ["image"]
    );
    assert!(named_modules("// crate::ui::App").is_empty());
}
