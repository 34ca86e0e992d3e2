//! Where tensor values sit in the slots on the leveled path: the gap packing of a (C, H, W)
//! tensor (channel c, pixel (y, x) at (c div g^2) B + (g y + (c mod g^2) div g) R + g x +
//! (c mod g^2) mod g, gap g, row length R, block length B; 004's appendix generalised to any
//! image size) and flat vectors in slots 0..F repeating with a power-of-two period.
//!
//! Invariant: `index` has one slot per tensor value (C-order), every slot below `period`, and
//! the data repeats every `period` slots (`period` = the slot count: no repetition).

use crate::fhe::graph::{ModelGraph, NodeOp};

/// Python's `_next_pow2`: the smallest power of two >= x (1 for x <= 1).
pub fn next_pow2(x: usize) -> usize {
    x.max(1).next_power_of_two()
}

/// The gap packing's grid: gap g, row length R, block length B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    pub gap: usize,
    pub row: usize,
    pub block: usize,
}

/// A tensor's slots: `index` (C-order over `shape`), the period it repeats with, and the grid of
/// an image tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotPacking {
    pub shape: Vec<usize>,
    pub index: Vec<i64>,
    pub period: usize,
    pub grid: Option<Grid>,
}

impl SlotPacking {
    /// A flat vector of `len` values in slots 0..len, repeating every `period`.
    pub fn flat(len: usize, period: usize) -> Self {
        Self { shape: vec![len], index: (0..len as i64).collect(), period, grid: None }
    }

    /// The packing of a network input of shape (C, H, W) on a grid with row length `row`, or
    /// (F,): slots c H R + y R + x, period the next power of two of C H R (or of F).
    pub fn input(shape: &[usize], row: usize) -> Self {
        if let [c, h, w] = *shape {
            let index = (0..c).flat_map(|ch| (0..h).flat_map(move |y| (0..w).map(move |x| (ch * h * row + y * row + x) as i64))).collect();
            Self { shape: shape.to_vec(), index, period: next_pow2(c * h * row), grid: Some(Grid { gap: 1, row, block: h * row }) }
        } else {
            let f = shape.iter().product();
            Self::flat(f, next_pow2(f))
        }
    }

    /// One past the highest slot used.
    pub fn extent(&self) -> i64 {
        self.index.iter().copied().max().map_or(0, |m| m + 1)
    }

    /// Index of the value at `(c, y, x)` of a (C, H, W) packing.
    pub fn at(&self, c: usize, y: usize, x: usize) -> i64 {
        self.index[(c * self.shape[1] + y) * self.shape[2] + x]
    }

    /// Values per entry of axis 0 (H W for an image, 1 for a vector).
    pub fn inner(&self) -> usize {
        self.shape.iter().skip(1).product()
    }

    /// The same slots as a flat vector (a flatten).
    pub fn flattened(&self) -> Self {
        Self { shape: vec![self.index.len()], index: self.index.clone(), period: self.period, grid: None }
    }

    /// Every slot holding value `i` (C-order), in every copy: slot `index[i] + k period`.
    /// Calls `f(slot, i)` copy after copy, as Python's `Packing.all_slots` orders them.
    pub fn for_all_slots(&self, slots: usize, mut f: impl FnMut(usize, usize)) {
        let copies = slots / self.period;
        for k in 0..copies {
            for (i, &s) in self.index.iter().enumerate() {
                f(s as usize + k * self.period, i);
            }
        }
    }
}

/// Row length of the gap packing's grid (Python's `_grid_row`): the widest g w over the image
/// tensors (the gap g grows with each stride, and an odd width leaves a stride-2 output one
/// column wider). `graph`'s input must be (C, H, W).
pub fn grid_row(graph: &ModelGraph) -> usize {
    let mut gaps: std::collections::HashMap<&str, usize> = std::collections::HashMap::from([(graph.input.as_str(), 1)]);
    let mut row = graph.input_shape.get(2).copied().unwrap_or(1);
    for node in &graph.nodes {
        let mut gap = node.inputs.first().and_then(|i| gaps.get(i.as_str())).copied().unwrap_or(1);
        match node.op {
            NodeOp::Conv => gap *= node.attrs.stride()[1],
            NodeOp::Avgpool => gap *= node.attrs.stride.or(node.attrs.kernel).map_or(1, |s| s[1]),
            _ => {}
        }
        gaps.insert(node.output.as_str(), gap);
        if node.shape.len() == 3 {
            row = row.max(gap * node.shape[2]);
        }
    }
    row
}

/// The slots the widest tensor needs (Python's `_slots_needed`).
pub fn slots_needed(graph: &ModelGraph) -> usize {
    let input = next_pow2(graph.input_shape.iter().product());
    graph.nodes.iter().map(|n| next_pow2(n.shape.iter().product())).fold(input, usize::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_packing_of_an_image_and_of_a_vector() {
        let p = SlotPacking::input(&[2, 3, 3], 5);
        assert_eq!(p.period, 32); // 2 * 3 * 5 = 30
        assert_eq!(p.grid, Some(Grid { gap: 1, row: 5, block: 15 }));
        assert_eq!(p.at(0, 0, 0), 0);
        assert_eq!(p.at(0, 1, 2), 7);
        assert_eq!(p.at(1, 2, 2), 15 + 10 + 2);
        assert_eq!(p.extent(), 28);
        let v = SlotPacking::input(&[100], 0);
        assert_eq!((v.period, v.extent(), v.grid), (128, 100, None));
        let mut seen = vec![];
        SlotPacking::flat(3, 4).for_all_slots(8, |s, i| seen.push((s, i)));
        assert_eq!(seen, [(0, 0), (1, 1), (2, 2), (4, 0), (5, 1), (6, 2)]);
    }

    #[test]
    fn next_pow2_matches_python() {
        assert_eq!([1, 2, 3, 4, 5, 1000].map(next_pow2), [1, 2, 4, 4, 8, 1024]);
    }
}
