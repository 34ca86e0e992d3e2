//! Layer shapes and the plain integer reference every algorithm must reproduce.

use crate::NnError;

/// A 2-D convolution on one C x H x W input (dilation 1). A fully connected layer is the 1 x 1
/// convolution of a 1 x 1 image: [`ConvShape::fully_connected`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvShape {
    pub c_in: usize,
    pub h: usize,
    pub w: usize,
    pub c_out: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: usize,
    pub pad_h: usize,
    pub pad_w: usize,
    pub groups: usize,
}

impl ConvShape {
    /// A square convolution with "same"-style padding k/2.
    pub fn conv(h: usize, c_in: usize, c_out: usize, k: usize, stride: usize) -> Self {
        Self { c_in, h, w: h, c_out, kh: k, kw: k, stride, pad_h: k / 2, pad_w: k / 2, groups: 1 }
    }

    /// A depthwise convolution (one group per channel).
    pub fn depthwise(h: usize, channels: usize, k: usize, stride: usize) -> Self {
        Self { groups: channels, ..Self::conv(h, channels, channels, k, stride) }
    }

    pub fn fully_connected(in_features: usize, out_features: usize) -> Self {
        Self { c_in: in_features, h: 1, w: 1, c_out: out_features, kh: 1, kw: 1, stride: 1, pad_h: 0, pad_w: 0, groups: 1 }
    }

    pub fn is_fully_connected(&self) -> bool {
        self.h == 1 && self.w == 1 && self.kh == 1 && self.kw == 1 && self.groups == 1
    }

    pub fn validate(&self) -> Result<(), NnError> {
        let fail = |m: String| Err(NnError::Shape(m));
        if self.c_in == 0 || self.c_out == 0 || self.h == 0 || self.w == 0 || self.kh == 0 || self.kw == 0 {
            return fail(format!("all sizes must be positive: {self:?}"));
        }
        if self.stride == 0 {
            return fail("stride must be at least 1".into());
        }
        if self.groups == 0 || !self.c_in.is_multiple_of(self.groups) || !self.c_out.is_multiple_of(self.groups) {
            return fail(format!("groups = {} must divide c_in = {} and c_out = {}", self.groups, self.c_in, self.c_out));
        }
        if self.h + 2 * self.pad_h < self.kh || self.w + 2 * self.pad_w < self.kw {
            return fail(format!("the {}x{} kernel is larger than the padded {}x{} input", self.kh, self.kw, self.h + 2 * self.pad_h, self.w + 2 * self.pad_w));
        }
        Ok(())
    }

    /// Output height and width.
    pub fn out_h(&self) -> usize {
        (self.h + 2 * self.pad_h - self.kh) / self.stride + 1
    }
    pub fn out_w(&self) -> usize {
        (self.w + 2 * self.pad_w - self.kw) / self.stride + 1
    }

    /// Output size at stride 1 (algorithms compute these and keep every stride-th).
    pub(crate) fn full_h(&self) -> usize {
        self.h + 2 * self.pad_h - self.kh + 1
    }
    pub(crate) fn full_w(&self) -> usize {
        self.w + 2 * self.pad_w - self.kw + 1
    }

    pub fn input_len(&self) -> usize {
        self.c_in * self.h * self.w
    }
    pub fn output_len(&self) -> usize {
        self.c_out * self.out_h() * self.out_w()
    }
    pub fn in_per_group(&self) -> usize {
        self.c_in / self.groups
    }
    /// Weights as [out][in / groups][kh][kw].
    pub fn weight_len(&self) -> usize {
        self.c_out * self.in_per_group() * self.kh * self.kw
    }
    /// Multiply-accumulates of the layer.
    pub fn macs(&self) -> usize {
        self.output_len() * self.in_per_group() * self.kh * self.kw
    }

    /// The weight for output channel o, input channel c (absolute), kernel offset (dy, dx), or
    /// None when c is outside o's group.
    pub(crate) fn weight(&self, weights: &[i64], o: usize, c: usize, dy: usize, dx: usize) -> Option<i64> {
        let per_in = self.in_per_group();
        let group = o / (self.c_out / self.groups);
        let c_rel = c.checked_sub(group * per_in).filter(|&r| r < per_in)?;
        Some(weights[((o * per_in + c_rel) * self.kh + dy) * self.kw + dx])
    }

    pub(crate) fn check_weights(&self, weights: &[i64]) -> Result<(), NnError> {
        if weights.len() != self.weight_len() {
            return Err(NnError::Count { what: "weights", expected: self.weight_len(), found: weights.len() });
        }
        Ok(())
    }
}

/// The convolution computed in plain integers and reduced modulo t: what every encrypted
/// algorithm must decrypt to. `x` is C x H x W, weights [out][in/groups][kh][kw]; output
/// C_out x H_out x W_out.
pub fn conv_reference(shape: &ConvShape, x: &[i64], weights: &[i64], t: u64) -> Result<Vec<u64>, NnError> {
    shape.validate()?;
    shape.check_weights(weights)?;
    if x.len() != shape.input_len() {
        return Err(NnError::Count { what: "input elements", expected: shape.input_len(), found: x.len() });
    }
    let (oh, ow) = (shape.out_h(), shape.out_w());
    let per_in = shape.in_per_group();
    let per_out = shape.c_out / shape.groups;
    let mut out = vec![0u64; shape.output_len()];
    for o in 0..shape.c_out {
        let g = o / per_out;
        for y in 0..oh {
            for xo in 0..ow {
                let mut acc: i128 = 0;
                for cr in 0..per_in {
                    let c = g * per_in + cr;
                    for dy in 0..shape.kh {
                        let iy = (y * shape.stride + dy) as isize - shape.pad_h as isize;
                        if iy < 0 || iy >= shape.h as isize {
                            continue;
                        }
                        for dx in 0..shape.kw {
                            let ix = (xo * shape.stride + dx) as isize - shape.pad_w as isize;
                            if ix < 0 || ix >= shape.w as isize {
                                continue;
                            }
                            let wv = weights[((o * per_in + cr) * shape.kh + dy) * shape.kw + dx];
                            acc += wv as i128 * x[(c * shape.h + iy as usize) * shape.w + ix as usize] as i128;
                        }
                    }
                }
                out[(o * oh + y) * ow + xo] = acc.rem_euclid(t as i128) as u64;
            }
        }
    }
    Ok(out)
}
