//! Node attributes and the filtering rules on a CPU [`MaxTree`].
//!
//! Node ids follow ≺ (a parent's id is smaller than its children's), so one reverse sweep over
//! the ids accumulates a child into its parent after the child is complete (bottom-up), and one
//! forward sweep sees a parent before its children (top-down restitution). Both are linear.

use super::{Attribute, FilterOutput, Rule, TreeKind};
use crate::image::{Gray, Image};

use super::cpu::MaxTree;

/// Per-node values of `attribute` (see the module docs of `maxtree` for the definitions).
pub(super) fn compute<T: Gray>(tree: &MaxTree<T>, attribute: Attribute) -> Vec<f64> {
    let nn = tree.nodes.len();
    let par = &tree.node_parent;
    let level: Vec<u32> = (0..nn).map(|i| tree.node_level(i)).collect();
    let plevel = |id: usize| {
        if id == 0 {
            level[0]
        } else {
            level[par[id] as usize]
        }
    };
    match attribute {
        Attribute::Area => area(tree).into_iter().map(|a| a as f64).collect(),
        Attribute::Height => {
            let mut maxlev = level.clone();
            for id in (1..nn).rev() {
                let p = par[id] as usize;
                maxlev[p] = maxlev[p].max(maxlev[id]);
            }
            (0..nn)
                .map(|id| f64::from(maxlev[id] - plevel(id)))
                .collect()
        }
        Attribute::Volume => {
            let area = area(tree);
            let mut vol = vec![0u64; nn];
            for id in (0..nn).rev() {
                vol[id] += area[id] * u64::from(level[id] - plevel(id));
                if id > 0 {
                    vol[par[id] as usize] += vol[id];
                }
            }
            vol.into_iter().map(|v| v as f64).collect()
        }
        Attribute::BboxWidth
        | Attribute::BboxHeight
        | Attribute::Diameter
        | Attribute::Diagonal => {
            let b = bbox(tree);
            b.iter()
                .map(|&[x0, x1, y0, y1]| {
                    let (w, h) = (f64::from(x1 - x0 + 1), f64::from(y1 - y0 + 1));
                    match attribute {
                        Attribute::BboxWidth => w,
                        Attribute::BboxHeight => h,
                        Attribute::Diameter => w.max(h),
                        _ => (w * w + h * h).sqrt(),
                    }
                })
                .collect()
        }
    }
}

fn area<T: Gray>(tree: &MaxTree<T>) -> Vec<u64> {
    let mut area = vec![0u64; tree.nodes.len()];
    for &id in &tree.node_of {
        area[id as usize] += 1;
    }
    for id in (1..area.len()).rev() {
        area[tree.node_parent[id] as usize] += area[id];
    }
    area
}

/// `[xmin, xmax, ymin, ymax]` per node.
fn bbox<T: Gray>(tree: &MaxTree<T>) -> Vec<[u32; 4]> {
    let mut b = vec![[u32::MAX, 0, u32::MAX, 0]; tree.nodes.len()];
    for (p, &id) in tree.node_of.iter().enumerate() {
        let (x, y) = ((p % tree.width) as u32, (p / tree.width) as u32);
        let e = &mut b[id as usize];
        *e = [e[0].min(x), e[1].max(x), e[2].min(y), e[3].max(y)];
    }
    for id in (1..b.len()).rev() {
        let c = b[id];
        let e = &mut b[tree.node_parent[id] as usize];
        *e = [
            e[0].min(c[0]),
            e[1].max(c[1]),
            e[2].min(c[2]),
            e[3].max(c[3]),
        ];
    }
    b
}

impl<T: Gray> MaxTree<T> {
    /// Filters with `attribute >= threshold` as the pass criterion. The attribute is computed on
    /// the first call and cached: further thresholds cost one restitution pass.
    #[must_use]
    pub fn filter(&self, attribute: Attribute, threshold: f64, rule: Rule) -> FilterOutput<T> {
        let attr = self.attribute(attribute);
        let pass: Vec<bool> = attr.iter().map(|&a| a >= threshold).collect();
        self.filter_with_pass(&pass, rule)
    }

    /// Restituted level (tree space) of every node for per-node pass flags under `rule`.
    /// `pass.len()` must be [`MaxTree::node_count`] (missing entries count as failing).
    #[must_use]
    pub(crate) fn node_values(&self, pass: &[bool], rule: Rule) -> Vec<u32> {
        let nn = self.nodes.len();
        let par = &self.node_parent;
        let passes = |id: usize| pass.get(id).copied().unwrap_or(false);
        let kept: Vec<bool> = match rule {
            Rule::Direct | Rule::Subtractive => (0..nn).map(passes).collect(),
            Rule::Min => {
                let mut k = vec![false; nn];
                for id in 0..nn {
                    k[id] = passes(id) && (id == 0 || k[par[id] as usize]);
                }
                k
            }
            Rule::Max => {
                let mut k: Vec<bool> = (0..nn).map(passes).collect();
                for id in (1..nn).rev() {
                    if k[id] {
                        k[par[id] as usize] = true;
                    }
                }
                k
            }
        };
        let mut v = vec![0u32; nn];
        for id in 0..nn {
            let lvl = self.node_level(id);
            let (base, plevel) = if id == 0 {
                (0, 0)
            } else {
                (v[par[id] as usize], self.node_level(par[id] as usize))
            };
            v[id] = match rule {
                Rule::Subtractive => base + if kept[id] { lvl - plevel } else { 0 },
                _ => {
                    if kept[id] {
                        lvl
                    } else {
                        base
                    }
                }
            };
        }
        v
    }

    /// Filtered image and residue for per-node pass flags (any criterion, increasing or not).
    #[must_use]
    pub(crate) fn filter_with_pass(&self, pass: &[bool], rule: Rule) -> FilterOutput<T> {
        let v = self.node_values(pass, rule);
        let n = self.values.len();
        let mut filtered = Vec::with_capacity(n);
        let mut residue = Vec::with_capacity(n);
        for (p, &g) in self.values.iter().enumerate() {
            let out = v.get(self.node_of[p] as usize).copied().unwrap_or(0);
            let res = g.to_u32().saturating_sub(out);
            let out = T::from_u32_sat(out);
            filtered.push(match self.kind {
                TreeKind::Max => out,
                TreeKind::Min => out.invert(),
            });
            residue.push(T::from_u32_sat(res));
        }
        let (w, h) = (self.width, self.height);
        FilterOutput {
            filtered: Image::from_fn(w, h, |x, y| filtered[y * w + x]),
            residue: Image::from_fn(w, h, |x, y| residue[y * w + x]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Connectivity, area_closing, area_opening};
    use super::*;

    fn img(w: usize, h: usize, v: &[u8]) -> Image<u8> {
        Image::from_vec(w, h, v.to_vec()).unwrap()
    }

    #[test]
    fn attributes_of_a_small_peak() {
        // 1 1 1 1
        // 1 5 7 1
        // 1 1 1 1
        let i = img(4, 3, &[1, 1, 1, 1, 1, 5, 7, 1, 1, 1, 1, 1]);
        let t = MaxTree::build(i.view(), TreeKind::Max, Connectivity::Four).unwrap();
        assert_eq!(t.node_count(), 3);
        // ids: 0 root (level 1), 1 level 5 {5,6}, 2 level 7 {6}.
        assert_eq!(t.attribute(Attribute::Area), &[12.0, 2.0, 1.0]);
        assert_eq!(t.attribute(Attribute::Height), &[6.0, 6.0, 2.0]);
        // volume: node 2: 1*(7-5)=2; node 1: 2*(5-1)+2=10; root: 12*0+10 = 10.
        assert_eq!(t.attribute(Attribute::Volume), &[10.0, 10.0, 2.0]);
        assert_eq!(t.attribute(Attribute::BboxWidth), &[4.0, 2.0, 1.0]);
        assert_eq!(t.attribute(Attribute::BboxHeight), &[3.0, 1.0, 1.0]);
        assert_eq!(t.attribute(Attribute::Diameter)[1], 2.0);
        assert_eq!(t.attribute(Attribute::Diagonal)[1], 5f64.sqrt());
        let o = t.filter(Attribute::Area, 2.0, Rule::Direct);
        assert_eq!(o.filtered.data(), &[1, 1, 1, 1, 1, 5, 5, 1, 1, 1, 1, 1]);
        assert_eq!(o.residue.data(), &[0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0]);
        // Threshold above the image area: scikit-image gives 0 everywhere.
        let o = t.filter(Attribute::Area, 13.0, Rule::Direct);
        assert!(o.filtered.data().iter().all(|&v| v == 0));
        assert_eq!(area_opening(i.view(), 1, Connectivity::Four).unwrap(), i);
        assert_eq!(area_opening(i.view(), 0, Connectivity::Four).unwrap(), i);
    }

    #[test]
    fn rules_on_a_non_increasing_criterion() {
        // Chain root(0) <- a(3) <- b(6) <- c(9) in 1D, criterion passes on a and c only.
        let i = img(4, 1, &[0, 3, 6, 9]);
        let t = MaxTree::build(i.view(), TreeKind::Max, Connectivity::Four).unwrap();
        assert_eq!(t.node_count(), 4);
        let pass = [true, true, false, true];
        let val = |r| t.node_values(&pass, r);
        assert_eq!(val(Rule::Direct), vec![0, 3, 3, 9]);
        assert_eq!(val(Rule::Min), vec![0, 3, 3, 3]);
        assert_eq!(val(Rule::Max), vec![0, 3, 6, 9]);
        // Subtractive: 0, +3, +0, +3.
        assert_eq!(val(Rule::Subtractive), vec![0, 3, 3, 6]);
        let pass = [false, true, true, true];
        assert_eq!(t.node_values(&pass, Rule::Direct), vec![0, 3, 6, 9]);
        assert_eq!(t.node_values(&pass, Rule::Min), vec![0, 0, 0, 0]);
        assert_eq!(t.node_values(&pass, Rule::Subtractive), vec![0, 3, 6, 9]);
    }

    #[test]
    fn closing_fills_small_dark_holes() {
        let i = img(3, 3, &[9, 9, 9, 9, 2, 9, 9, 9, 9]);
        let c = area_closing(i.view(), 2, Connectivity::Four).unwrap();
        assert!(c.data().iter().all(|&v| v == 9));
        let t = MaxTree::build(i.view(), TreeKind::Min, Connectivity::Four).unwrap();
        let o = t.filter(Attribute::Area, 2.0, Rule::Direct);
        assert_eq!(o.residue.data(), &[0, 0, 0, 0, 7, 0, 0, 0, 0]);
    }

    #[test]
    fn sixteen_bit_extremes() {
        let i = Image::from_vec(3, 1, vec![0u16, 65535, 0]).unwrap();
        let t = MaxTree::build(i.view(), TreeKind::Max, Connectivity::Four).unwrap();
        assert_eq!(t.attribute(Attribute::Volume), &[65535.0, 65535.0]);
        assert_eq!(
            t.filter(Attribute::Area, 2.0, Rule::Direct).filtered.data(),
            &[0, 0, 0]
        );
        let t = MaxTree::build(i.view(), TreeKind::Min, Connectivity::Four).unwrap();
        let o = t.filter(Attribute::Area, 2.0, Rule::Direct);
        assert_eq!(o.filtered.data(), &[65535, 65535, 65535]);
        assert_eq!(o.residue.data(), &[65535, 0, 65535]);
    }
}
