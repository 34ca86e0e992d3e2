//! Inputs whose single channel does not fit one ciphertext (an ImageNet image: 224 x 224 on a
//! 256 x 256 grid is 2^16 slots, a ciphertext at logN = 16 holds 2^15): the client sends them
//! space-to-depth, pixel (c, f y + r, f x + q) as pixel (y, x) of channel c f^2 + r f + q (the
//! factor f the smallest power of two whose (ceil(H / f), ceil(W / f)) channel fits), and every
//! convolution reading the input, whose stride s must be a multiple of f, is rewritten onto that
//! tensor: stride s / f, an odd square kernel over the offsets floor((dy - pad) / f), the same
//! output. Exact: each weight lands on the one polyphase pixel it read before.

use std::borrow::Cow;

use super::fail;
use crate::fhe::graph::{GraphNode, ModelGraph, NodeAttrs, NodeOp, Tensor};
use crate::Result;

/// The factor f and the (C f^2, ceil(H / f), ceil(W / f)) shape of the rearranged input.
pub fn rearranged_shape(shape: &[usize], factor: usize) -> Vec<usize> {
    vec![shape[0] * factor * factor, shape[1].div_ceil(factor), shape[2].div_ceil(factor)]
}

/// The input `x` (C, H, W) rearranged by `factor` (module docs), zeros where H or W do not
/// divide.
pub fn rearrange(x: &[f64], shape: &[usize], factor: usize) -> Vec<f64> {
    let (c, h, w) = (shape[0], shape[1], shape[2]);
    let out = rearranged_shape(shape, factor);
    let (hs, ws) = (out[1], out[2]);
    let mut v = vec![0.0; out.iter().product()];
    for ch in 0..c {
        for y in 0..h {
            for x_ in 0..w {
                let phase = ch * factor * factor + (y % factor) * factor + x_ % factor;
                v[(phase * hs + y / factor) * ws + x_ / factor] = x[(ch * h + y) * w + x_];
            }
        }
    }
    v
}

/// A convolution reading the rearranged input: stride s / f and the weights moved onto the
/// polyphase channels.
fn rewrite_conv(node: &GraphNode, c_in: usize, factor: usize) -> Result<GraphNode> {
    let d = node.describe();
    let w = node.required("weight")?;
    let [s, sx] = node.attrs.stride();
    let [top, left, bottom, right] = node.attrs.pads();
    let (c_out, kh, kw) = (w.shape[0], w.shape[2], w.shape[3]);
    if s != sx || s % factor != 0 || node.attrs.groups() != 1 || kh != kw || top != left || top != bottom || top != right || w.shape[1] != c_in {
        return Err(fail(format!(
            "{d}: the input ({c_in} channels) is larger than a ciphertext per channel and arrives space-to-depth by {factor}; a convolution reading it needs a stride that is a multiple of {factor}, a square kernel, equal padding and no groups"
        )));
    }
    let (k, pad) = (kh as i64, top as i64);
    let f = factor as i64;
    let offset = |dy: i64| (dy - pad).div_euclid(f);
    let reach = offset(0).abs().max(offset(k - 1).abs());
    let big = (2 * reach + 1) as usize;
    let phases = factor * factor;
    let mut out = vec![0.0; c_out * c_in * phases * big * big];
    for o in 0..c_out {
        for c in 0..c_in {
            for dy in 0..k {
                for dx in 0..k {
                    let (ay, ry) = (offset(dy), (dy - pad).rem_euclid(f));
                    let (ax, rx) = (offset(dx), (dx - pad).rem_euclid(f));
                    let channel = c * phases + (ry * f + rx) as usize;
                    let (ty, tx) = ((ay + reach) as usize, (ax + reach) as usize);
                    out[((o * c_in * phases + channel) * big + ty) * big + tx] = w.data[((o * c_in + c) * kh + dy as usize) * kw + dx as usize];
                }
            }
        }
    }
    let mut rewritten = node.clone();
    rewritten.attrs = NodeAttrs { stride: Some([s / factor; 2]), pads: Some([big / 2; 4]), groups: Some(1), ..node.attrs.clone() };
    rewritten.params.insert("weight".into(), Some(Tensor::new(vec![c_out, c_in * phases, big, big], out)));
    Ok(rewritten)
}

/// `graph` with its input rearranged when one of its channels does not fit `slots` (module
/// docs), and the factor (None: unchanged).
pub fn apply(graph: &ModelGraph, slots: usize) -> Result<(Cow<'_, ModelGraph>, Option<usize>)> {
    let [c, h, w] = graph.input_shape[..] else { return Ok((Cow::Borrowed(graph), None)) };
    let fits = |h: usize, w: usize| h.next_power_of_two() * w.next_power_of_two() <= slots;
    if fits(h, w) {
        return Ok((Cow::Borrowed(graph), None));
    }
    let mut factor = 2;
    while !fits(h.div_ceil(factor), w.div_ceil(factor)) {
        factor *= 2;
    }
    let mut g = graph.clone();
    g.input_shape = rearranged_shape(&graph.input_shape, factor);
    for node in g.nodes.iter_mut().filter(|n| n.inputs.contains(&graph.input)) {
        if node.op != NodeOp::Conv || node.inputs.len() != 1 {
            return Err(fail(format!(
                "{}: the input {:?} is larger than a ciphertext per channel and arrives space-to-depth by {factor}; only convolutions may read it",
                node.describe(),
                graph.input_shape
            )));
        }
        *node = rewrite_conv(node, c, factor)?;
    }
    Ok((Cow::Owned(g), Some(factor)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cross-correlation of (C, H, W) with [O][C][k][k], stride s, padding p on every side.
    fn conv(x: &[f64], shape: [usize; 3], w: &[f64], o: usize, k: usize, s: usize, p: usize) -> (Vec<f64>, [usize; 2]) {
        let [c, h, wd] = shape;
        let (ho, wo) = ((h + 2 * p - k) / s + 1, (wd + 2 * p - k) / s + 1);
        let mut y = vec![0.0; o * ho * wo];
        for oc in 0..o {
            for oy in 0..ho {
                for ox in 0..wo {
                    let mut acc = 0.0;
                    for ic in 0..c {
                        for dy in 0..k {
                            for dx in 0..k {
                                let (iy, ix) = ((s * oy + dy) as i64 - p as i64, (s * ox + dx) as i64 - p as i64);
                                if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < wd {
                                    acc += w[((oc * c + ic) * k + dy) * k + dx] * x[(ic * h + iy as usize) * wd + ix as usize];
                                }
                            }
                        }
                    }
                    y[(oc * ho + oy) * wo + ox] = acc;
                }
            }
        }
        (y, [ho, wo])
    }

    #[test]
    fn a_strided_convolution_on_the_rearranged_input_is_the_same_convolution() {
        // ResNet's stem (7 x 7, stride 2, padding 3) at factor 2, a 3 x 3 at stride 4 at factor
        // 2 and 4, odd sizes included.
        for (c, h, w, o, k, s, p, factor) in [(3, 14, 14, 4, 7, 2, 3, 2), (2, 9, 11, 3, 3, 4, 1, 2), (2, 16, 12, 2, 3, 4, 1, 4), (1, 10, 10, 2, 5, 2, 2, 2)] {
            let x: Vec<f64> = (0..c * h * w).map(|i| ((i * 7919) % 97) as f64 / 97.0 - 0.5).collect();
            let wt: Vec<f64> = (0..o * c * k * k).map(|i| ((i * 104729) % 89) as f64 / 89.0 - 0.5).collect();
            let (want, [ho, wo]) = conv(&x, [c, h, w], &wt, o, k, s, p);
            let node = GraphNode {
                op: NodeOp::Conv,
                name: "stem".into(),
                inputs: vec!["x".into()],
                output: "y".into(),
                shape: vec![o, ho, wo],
                attrs: NodeAttrs { stride: Some([s, s]), pads: Some([p; 4]), groups: Some(1), ..Default::default() },
                params: [("weight".to_string(), Some(Tensor::new(vec![o, c, k, k], wt)))].into(),
            };
            let r = rewrite_conv(&node, c, factor).unwrap();
            let shape = rearranged_shape(&[c, h, w], factor);
            let big = r.param("weight").unwrap().shape[2];
            let (got, [gh, gw]) =
                conv(&rearrange(&x, &[c, h, w], factor), [shape[0], shape[1], shape[2]], &r.param("weight").unwrap().data, o, big, s / factor, big / 2);
            // The rewritten convolution's output covers the original's (it may be larger).
            assert!(gh >= ho && gw >= wo, "{c} {h} {w} {k} {s} {p} {factor}");
            for oc in 0..o {
                for y in 0..ho {
                    for x_ in 0..wo {
                        let (a, b) = (got[(oc * gh + y) * gw + x_], want[(oc * ho + y) * wo + x_]);
                        assert!((a - b).abs() < 1e-12, "{c} {h} {w} {k} {s} {p} {factor}: ({oc}, {y}, {x_}) {a} != {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_reader_that_is_not_a_strided_convolution_is_refused_by_name() {
        let node = GraphNode {
            op: NodeOp::Conv,
            name: "c".into(),
            inputs: vec!["x".into()],
            output: "y".into(),
            shape: vec![1, 4, 4],
            attrs: NodeAttrs { stride: Some([1, 1]), pads: Some([1; 4]), ..Default::default() },
            params: [("weight".to_string(), Some(Tensor::new(vec![1, 1, 3, 3], vec![1.0; 9])))].into(),
        };
        let e = rewrite_conv(&node, 1, 2).unwrap_err().to_string();
        assert!(e.contains("conv node 'c'") && e.contains("multiple of 2"), "{e}");
    }
}
