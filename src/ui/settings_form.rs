//! A generic editor for a serde settings struct made of TOML sections (`OpSettings`): one
//! collapsible section per top-level table, one row per key, the widget chosen from the value's
//! TOML type, so a new analysis' section appears with no UI code.
//!
//! | TOML value | widget |
//! |---|---|
//! | `enabled` (bool, in a section) | checkbox in the section header |
//! | other bool | checkbox |
//! | integer | drag value (min 0 when the struct rejects -1) |
//! | float | drag value, speed proportional to the value |
//! | string that the struct only accepts from a fixed set | combo box (see below) |
//! | other string, array | text field (parsed as a TOML value when it is one: `128` → integer) |
//! | table | nested group |
//!
//! Enum choices are *inferred*: the form writes a nonsense string into the field and
//! deserializes; serde's error `unknown variant `x`, expected one of `a`, `b`` lists the
//! variants. Tooltips come from the comment lines above each key in `config/default.toml`. Any
//! row can be switched to a plain text field from its label's context menu (for values that take
//! a number or a word, like `threshold = "otsu"` or `128`).
//!
//! Every change is deserialized into the struct and validated; a valid result is returned to the
//! caller (who sends it to the worker), an invalid one is shown in red under its section and not
//! applied.

use std::collections::{HashMap, HashSet};

use eframe::egui::{self, Color32, RichText};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Editor state (see the module docs).
pub struct SettingsForm {
    value: toml::Value,
    defaults: toml::Value,
    docs: HashMap<String, String>,
    order: HashMap<String, Vec<String>>,
    choices: HashMap<String, Vec<String>>,
    unsigned: HashSet<String>,
    text_mode: HashSet<String>,
    text_buffers: HashMap<String, String>,
    errors: HashMap<String, String>,
    id_salt: String,
}

/// What a row of the form did this frame.
#[derive(Default)]
struct Edit {
    changed_section: Option<String>,
    reset_section: Option<String>,
}

impl SettingsForm {
    /// A form over `value`, with `defaults` for the per-section reset and `docs_toml` (a TOML
    /// text with `#` comments above keys) for tooltips and key order.
    pub fn new<T: Serialize + DeserializeOwned>(
        id_salt: &str,
        value: &T,
        defaults: &T,
        docs_toml: &str,
    ) -> Self {
        let (docs, order) = parse_docs(docs_toml);
        let mut f = Self {
            value: to_value(value),
            defaults: to_value(defaults),
            docs,
            order,
            choices: HashMap::new(),
            unsigned: HashSet::new(),
            text_mode: HashSet::new(),
            text_buffers: HashMap::new(),
            errors: HashMap::new(),
            id_salt: id_salt.to_owned(),
        };
        f.probe::<T>();
        f
    }

    /// Replaces the edited values (after a reset or a load), dropping errors and text buffers.
    pub(crate) fn reset_from<T: Serialize + DeserializeOwned>(&mut self, value: &T) {
        self.value = to_value(value);
        self.errors.clear();
        self.text_buffers.clear();
        self.probe::<T>();
    }

    /// The inferred choices of a string field (`section.key`), if it is an enum.
    #[must_use]
    pub fn choices(&self, path: &str) -> Option<&[String]> {
        self.choices.get(path).map(Vec::as_slice)
    }

    /// The error shown under `section`, if any.
    #[must_use]
    pub fn error(&self, section: &str) -> Option<&str> {
        self.errors.get(section).map(String::as_str)
    }

    /// Finds enum choices of string leaves and integer leaves that reject negatives.
    fn probe<T: DeserializeOwned>(&mut self) {
        let mut leaves = Vec::new();
        collect_leaves(&self.value, "", &mut leaves);
        for path in leaves {
            let Some(v) = get_path(&self.value, &path) else {
                continue;
            };
            match v {
                toml::Value::String(_) => {
                    let mut probe = self.value.clone();
                    set_path(&mut probe, &path, toml::Value::String("\u{1}probe".into()));
                    if let Err(e) = probe.try_into::<T>()
                        && let Some(c) = parse_variants(&e.to_string())
                    {
                        self.choices.insert(path.clone(), c);
                    }
                }
                toml::Value::Integer(_) => {
                    let mut probe = self.value.clone();
                    set_path(&mut probe, &path, toml::Value::Integer(-1));
                    if probe.try_into::<T>().is_err() {
                        self.unsigned.insert(path.clone());
                    }
                }
                _ => {}
            }
        }
    }

    /// Draws every section. Returns the new struct when an edit produced a valid one.
    pub fn ui<T: Serialize + DeserializeOwned>(
        &mut self,
        ui: &mut egui::Ui,
        validate: impl Fn(&T) -> Result<(), (String, String)>,
    ) -> Option<T> {
        let mut value = std::mem::replace(&mut self.value, toml::Value::Boolean(false));
        let mut edit = Edit::default();
        if let toml::Value::Table(sections) = &mut value {
            let keys = self.ordered_keys("", sections);
            for section in keys {
                if let Some(v) = sections.get_mut(&section) {
                    self.section_ui(ui, &section, v, &mut edit);
                }
            }
        }
        if let Some(s) = &edit.reset_section {
            if let (toml::Value::Table(t), Some(d)) = (&mut value, get_path(&self.defaults, s)) {
                t.insert(s.clone(), d.clone());
            }
            self.text_buffers
                .retain(|k, _| !k.starts_with(&format!("{s}.")));
            edit.changed_section = Some(s.clone());
        }
        self.value = value;
        let section = edit.changed_section?;
        match self.value.clone().try_into::<T>() {
            Ok(t) => match validate(&t) {
                Ok(()) => {
                    self.errors.clear();
                    Some(t)
                }
                Err((key, msg)) => {
                    self.errors.insert(section, format!("{key}: {msg}"));
                    None
                }
            },
            Err(e) => {
                self.errors.insert(section, one_line(&e.to_string()));
                None
            }
        }
    }

    fn ordered_keys(&self, path: &str, table: &toml::Table) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        if let Some(order) = self.order.get(path) {
            keys.extend(order.iter().filter(|k| table.contains_key(*k)).cloned());
        }
        for k in table.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        keys
    }

    fn section_ui(
        &mut self,
        ui: &mut egui::Ui,
        section: &str,
        v: &mut toml::Value,
        edit: &mut Edit,
    ) {
        let toml::Value::Table(table) = v else {
            // A top-level scalar: a one-row section.
            egui::Grid::new((&self.id_salt, section))
                .num_columns(2)
                .show(ui, |ui| {
                    if self.row_ui(ui, section, section, v) {
                        edit.changed_section = Some(section.to_owned());
                    }
                });
            return;
        };
        if table.keys().all(|k| k == "enabled") {
            // Nothing to edit but the switch: a plain row, no collapsing body.
            ui.horizontal(|ui| self.header_ui(ui, section, table, edit));
            return;
        }
        let id = ui.make_persistent_id((&self.id_salt, "section", section));
        let header =
            egui::collapsing_header::CollapsingState::load_with_default_open(ui.ctx(), id, true);
        header
            .show_header(ui, |ui| self.header_ui(ui, section, table, edit))
            .body(|ui| {
                let enabled = !matches!(table.get("enabled"), Some(toml::Value::Boolean(false)));
                ui.add_enabled_ui(enabled, |ui| {
                    if self.table_ui(ui, section, table) {
                        edit.changed_section = Some(section.to_owned());
                    }
                });
                if let Some(e) = self.errors.get(section) {
                    ui.label(RichText::new(e).color(Color32::from_rgb(255, 110, 100)));
                }
            });
    }

    /// The section's header: its `enabled` switch (or name) and the reset button.
    fn header_ui(
        &self,
        ui: &mut egui::Ui,
        section: &str,
        table: &mut toml::Table,
        edit: &mut Edit,
    ) {
        if let Some(toml::Value::Boolean(b)) = table.get_mut("enabled") {
            let tip = self
                .docs
                .get(&format!("{section}.enabled"))
                .cloned()
                .unwrap_or_else(|| format!("run {section}"));
            if ui
                .checkbox(b, RichText::new(section).strong())
                .on_hover_text(tip)
                .changed()
            {
                edit.changed_section = Some(section.to_owned());
            }
        } else {
            let r = ui.label(RichText::new(section).strong());
            if let Some(d) = self.docs.get(section) {
                r.on_hover_text(d);
            }
        }
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            let differs = get_path(&self.defaults, section)
                .is_some_and(|d| *d != toml::Value::Table(table.clone()));
            let b = ui.add_enabled(differs, egui::Button::new("reset").small());
            if b.on_hover_text(format!("reset [{section}] to its defaults"))
                .clicked()
            {
                edit.reset_section = Some(section.to_owned());
            }
        });
    }

    /// Rows of a table (every key but `enabled` at section level); true when one changed.
    fn table_ui(&mut self, ui: &mut egui::Ui, path: &str, table: &mut toml::Table) -> bool {
        let mut changed = false;
        let keys = self.ordered_keys(path, table);
        let top_level_section = !path.contains('.');
        egui::Grid::new((&self.id_salt, path))
            .num_columns(2)
            .spacing([8.0, 4.0])
            .show(ui, |ui| {
                for k in &keys {
                    if top_level_section && k == "enabled" {
                        continue;
                    }
                    let child = format!("{path}.{k}");
                    let Some(v) = table.get_mut(k) else { continue };
                    if let toml::Value::Table(t) = v {
                        ui.label(RichText::new(k).italics());
                        ui.end_row();
                        ui.label("");
                        ui.vertical(|ui| changed |= self.table_ui(ui, &child, t));
                        ui.end_row();
                    } else {
                        changed |= self.row_ui(ui, k, &child, v);
                    }
                }
            });
        changed
    }

    /// One `label | widget` row; true when the value changed.
    fn row_ui(&mut self, ui: &mut egui::Ui, name: &str, path: &str, v: &mut toml::Value) -> bool {
        let doc = self.docs.get(path).cloned();
        let mut label = ui.label(name);
        if let Some(d) = &doc {
            label = label.on_hover_text(d);
        }
        let text_mode = self.text_mode.contains(path);
        label.context_menu(|ui| {
            let mut t = text_mode;
            if ui.checkbox(&mut t, "edit as text").clicked() {
                if t {
                    self.text_mode.insert(path.to_owned());
                } else {
                    self.text_mode.remove(path);
                    self.text_buffers.remove(path);
                }
                ui.close();
            }
        });
        let changed = if text_mode {
            self.text_ui(ui, path, v, label.id)
        } else {
            match v {
                toml::Value::Boolean(b) => ui.checkbox(b, "").labelled_by(label.id).changed(),
                toml::Value::Integer(i) => {
                    let speed = integer_speed(*i);
                    let mut d = egui::DragValue::new(i).speed(speed);
                    if self.unsigned.contains(path) {
                        d = d.range(0..=i64::MAX);
                    }
                    ui.add(d).labelled_by(label.id).changed()
                }
                toml::Value::Float(f) => {
                    let speed = (f.abs() * 0.01).max(0.001);
                    ui.add(egui::DragValue::new(f).speed(speed).max_decimals(4))
                        .labelled_by(label.id)
                        .changed()
                }
                toml::Value::String(s) if self.choices.contains_key(path) => {
                    let choices = self.choices.get(path).cloned().unwrap_or_default();
                    let before = s.clone();
                    let r = egui::ComboBox::from_id_salt((&self.id_salt, path))
                        .selected_text(s.as_str())
                        .show_ui(ui, |ui| {
                            for c in &choices {
                                ui.selectable_value(s, c.clone(), c);
                            }
                        });
                    r.response.labelled_by(label.id);
                    *s != before
                }
                _ => self.text_ui(ui, path, v, label.id),
            }
        };
        ui.end_row();
        changed
    }

    /// A text field; strings are taken as typed unless they read as a TOML number/bool/array.
    fn text_ui(
        &mut self,
        ui: &mut egui::Ui,
        path: &str,
        v: &mut toml::Value,
        label: egui::Id,
    ) -> bool {
        let current = match &*v {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let buf = self.text_buffers.entry(path.to_owned()).or_insert(current);
        let r = ui
            .add(egui::TextEdit::singleline(buf).desired_width(140.0))
            .labelled_by(label);
        if !r.changed() {
            return false;
        }
        let text = buf.trim();
        let parsed = toml::from_str::<toml::Table>(&format!("v = {text}"))
            .ok()
            .and_then(|mut t| t.remove("v"));
        *v = match parsed {
            Some(p) => p,
            None => toml::Value::String(text.to_owned()),
        };
        true
    }
}

fn integer_speed(i: i64) -> f64 {
    ((i.unsigned_abs() as f64) * 0.01).clamp(0.05, 100.0)
}

fn to_value<T: Serialize>(v: &T) -> toml::Value {
    toml::Value::try_from(v).unwrap_or_else(|e| {
        log::warn!("settings form: cannot represent settings as TOML: {e}");
        toml::Value::Table(toml::Table::new())
    })
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn collect_leaves(v: &toml::Value, path: &str, out: &mut Vec<String>) {
    match v {
        toml::Value::Table(t) => {
            for (k, c) in t {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                collect_leaves(c, &p, out);
            }
        }
        _ => out.push(path.to_owned()),
    }
}

fn get_path<'a>(v: &'a toml::Value, path: &str) -> Option<&'a toml::Value> {
    path.split('.').try_fold(v, |cur, k| cur.as_table()?.get(k))
}

fn set_path(v: &mut toml::Value, path: &str, new: toml::Value) {
    let mut cur = v;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, k) in parts.iter().enumerate() {
        let Some(t) = cur.as_table_mut() else { return };
        if i + 1 == parts.len() {
            t.insert((*k).to_owned(), new);
            return;
        }
        let Some(next) = t.get_mut(*k) else { return };
        cur = next;
    }
}

/// The variant names of serde's `unknown variant` error: "expected `a`", "expected `a` or `b`",
/// "expected one of `a`, `b`, `c`".
#[must_use]
pub(crate) fn parse_variants(msg: &str) -> Option<Vec<String>> {
    let rest = &msg[msg.find("unknown variant")?..];
    let rest = &rest[rest.find("expected ")? + "expected ".len()..];
    let mut rest = rest.strip_prefix("one of ").unwrap_or(rest);
    let mut out = Vec::new();
    loop {
        let body = rest.strip_prefix('`')?;
        let end = body.find('`')?;
        out.push(body[..end].to_owned());
        rest = &body[end + 1..];
        if let Some(r) = rest
            .strip_prefix(", ")
            .or_else(|| rest.strip_prefix(" or "))
        {
            rest = r;
        } else {
            break;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Comments above keys (`section.key` → text) and key order per section from a TOML text.
#[must_use]
pub(crate) fn parse_docs(text: &str) -> (HashMap<String, String>, HashMap<String, Vec<String>>) {
    let mut docs = HashMap::new();
    let mut order: HashMap<String, Vec<String>> = HashMap::new();
    let mut section = String::new();
    let mut comment: Vec<String> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(h) = t.strip_prefix('[') {
            let name = h.trim_end_matches(']').trim().to_owned();
            let (parent, last) = match name.rsplit_once('.') {
                Some((p, l)) => (p.to_owned(), l.to_owned()),
                None => (String::new(), name.clone()),
            };
            let list = order.entry(parent).or_default();
            if !list.contains(&last) {
                list.push(last);
            }
            if !comment.is_empty() {
                docs.insert(name.clone(), comment.join(" "));
            }
            section = name;
            comment.clear();
        } else if let Some(c) = t.strip_prefix('#') {
            comment.push(c.trim().to_owned());
        } else if let Some((k, _)) = t.split_once('=') {
            let k = k.trim().to_owned();
            let path = if section.is_empty() {
                k.clone()
            } else {
                format!("{section}.{k}")
            };
            if !comment.is_empty() {
                docs.insert(path, comment.join(" "));
            }
            order.entry(section.clone()).or_default().push(k);
            comment.clear();
        } else if t.is_empty() {
            comment.clear();
        }
    }
    (docs, order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_read_from_serde_errors() {
        assert_eq!(
            parse_variants("unknown variant `x`, expected `a`").unwrap(),
            vec!["a"]
        );
        assert_eq!(
            parse_variants("unknown variant `x`, expected `a` or `b`\nin `s.k`").unwrap(),
            vec!["a", "b"]
        );
        assert_eq!(
            parse_variants("unknown variant `x`, expected one of `a`, `b`, `c` for key `s.k`")
                .unwrap(),
            vec!["a", "b", "c"]
        );
        assert!(parse_variants("invalid type: string, expected u32").is_none());
    }

    #[test]
    fn docs_and_order_come_from_comments() {
        let (docs, order) =
            parse_docs("[a]\n# first\n# line\nx = 1\n\n# lost\n\ny = 2\n[a.b]\nz = 3\n");
        assert_eq!(docs.get("a.x").unwrap(), "first line");
        assert!(!docs.contains_key("a.y"));
        assert_eq!(
            order.get("a").unwrap(),
            &vec!["x".to_owned(), "y".to_owned(), "b".to_owned()]
        );
        assert_eq!(order.get("").unwrap(), &vec!["a".to_owned()]);
    }
}
