//! The model front's graph (python/lycaon/frontend/ir.py: `Graph`, `Node`) as JSON, the input of
//! the FHE compiler: one input tensor (C, H, W) or (F,), nodes in topological order, each reading
//! named tensors and writing one, with its attributes, its parameters (flat row-major values
//! with their shape) and its output shape. Python writes it (`lycaon.frontend.graph_json`) after
//! batch-norm folding and the monic-quadratic rewrite.
//!
//! Loading validates what the compiler relies on, with an error naming the node: the format,
//! names (non-empty, every input written before it is read, no tensor written twice), parameter
//! sizes (values = product of the shape, all finite), and every node's output shape inferred
//! again as ir.py infers it and compared with the one written.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::{Result, RuntimeError};

/// The format tag and version of a graph JSON; another version is refused.
pub const GRAPH_FORMAT: &str = "lycaon-graph";
pub const GRAPH_VERSION: u32 = 1;

fn invalid(what: impl Into<String>) -> RuntimeError {
    RuntimeError::Graph(what.into())
}

/// The operations of the model front (ir.py's `SUPPORTED_OPS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeOp {
    Conv,
    Batchnorm,
    Relu,
    Clip,
    Poly,
    Maxpool,
    Avgpool,
    GlobalAvgpool,
    Linear,
    Flatten,
    Add,
    Concat,
}

impl NodeOp {
    /// The name ir.py uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Conv => "conv",
            Self::Batchnorm => "batchnorm",
            Self::Relu => "relu",
            Self::Clip => "clip",
            Self::Poly => "poly",
            Self::Maxpool => "maxpool",
            Self::Avgpool => "avgpool",
            Self::GlobalAvgpool => "global_avgpool",
            Self::Linear => "linear",
            Self::Flatten => "flatten",
            Self::Add => "add",
            Self::Concat => "concat",
        }
    }
}

/// A parameter array: `data` holds the values in row-major (C) order, `shape` their shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl Tensor {
    pub fn new(shape: Vec<usize>, data: Vec<f64>) -> Self {
        Self { shape, data }
    }

    /// Values along axis 0 (a vector of `shape[0]` rows of the rest).
    pub fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// Row `r` of a 2-D tensor.
    pub fn row(&self, r: usize) -> &[f64] {
        let width = self.shape.get(1).copied().unwrap_or(1);
        &self.data[r * width..(r + 1) * width]
    }
}

/// A node's attributes (ir.py's `attrs`); every key the model front writes, none other.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeAttrs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride: Option<[usize; 2]>,
    /// (top, left, bottom, right).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pads: Option<[usize; 4]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dilation: Option<[usize; 2]>,
    /// Pooling window (kh, kw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<[usize; 2]>,
    /// Batch-norm epsilon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps: Option<f64>,
    /// clip(x, min, max).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// What a `poly` node is (`aespa-quadratic`, `channel-scale`): informative only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

impl NodeAttrs {
    pub fn stride(&self) -> [usize; 2] {
        self.stride.unwrap_or([1, 1])
    }

    pub fn pads(&self) -> [usize; 4] {
        self.pads.unwrap_or([0; 4])
    }

    pub fn groups(&self) -> usize {
        self.groups.unwrap_or(1)
    }
}

/// One operation of the graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphNode {
    pub op: NodeOp,
    pub name: String,
    pub inputs: Vec<String>,
    pub output: String,
    /// The output shape (without the batch dimension).
    pub shape: Vec<usize>,
    #[serde(default)]
    pub attrs: NodeAttrs,
    /// Parameter arrays by name (`weight`, `bias`, `coefficients`, batch-norm's `scale`, `bias`,
    /// `mean`, `var`); null for an absent one (a convolution without bias).
    #[serde(default)]
    pub params: BTreeMap<String, Option<Tensor>>,
}

impl GraphNode {
    /// "conv node 'conv1'", as ir.py's `Node.describe`.
    pub fn describe(&self) -> String {
        format!("{} node '{}'", self.op.as_str(), self.name)
    }

    /// A parameter that is present (not absent, not null).
    pub fn param(&self, key: &str) -> Option<&Tensor> {
        self.params.get(key).and_then(Option::as_ref)
    }

    /// A parameter the node must have.
    pub fn required(&self, key: &str) -> Result<&Tensor> {
        self.param(key).ok_or_else(|| invalid(format!("{}: parameter '{key}' is missing", self.describe())))
    }
}

/// The network: input tensor, nodes in topological order, output tensor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelGraph {
    pub format: String,
    pub version: u32,
    pub name: String,
    pub input: String,
    pub input_shape: Vec<usize>,
    pub output: String,
    pub nodes: Vec<GraphNode>,
}

impl ModelGraph {
    /// Parses and validates a graph JSON.
    pub fn from_json(text: &str) -> Result<Self> {
        let g: Self = serde_json::from_str(text).map_err(|e| invalid(format!("malformed graph JSON: {e}")))?;
        g.validate()?;
        Ok(g)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a graph serialises")
    }

    /// Every tensor's shape: the input's and each node's output.
    pub fn shapes(&self) -> HashMap<&str, &[usize]> {
        let mut out: HashMap<&str, &[usize]> = HashMap::with_capacity(self.nodes.len() + 1);
        out.insert(self.input.as_str(), self.input_shape.as_slice());
        for n in &self.nodes {
            out.insert(n.output.as_str(), n.shape.as_slice());
        }
        out
    }

    /// How many nodes read each tensor (the output counts as read once more).
    pub fn readers(&self) -> HashMap<&str, usize> {
        let mut r: HashMap<&str, usize> = HashMap::from([(self.output.as_str(), 1)]);
        for n in &self.nodes {
            for i in &n.inputs {
                *r.entry(i.as_str()).or_insert(0) += 1;
            }
        }
        r
    }

    /// Checks the format, names, parameter sizes and every output shape (module docs).
    pub fn validate(&self) -> Result<()> {
        if self.format != GRAPH_FORMAT || self.version != GRAPH_VERSION {
            return Err(invalid(format!(
                "graph format '{}' version {} (this build reads '{GRAPH_FORMAT}' version {GRAPH_VERSION})",
                self.format, self.version
            )));
        }
        if self.input.is_empty() {
            return Err(invalid("the input tensor has no name"));
        }
        if !matches!(self.input_shape.len(), 1 | 3) || self.input_shape.contains(&0) {
            return Err(invalid(format!("input shape {:?}: expected (C, H, W) or (F,) with every dimension positive", self.input_shape)));
        }
        let mut shapes: HashMap<&str, Vec<usize>> = HashMap::from([(self.input.as_str(), self.input_shape.clone())]);
        for node in &self.nodes {
            if node.name.is_empty() {
                return Err(invalid(format!("a {} node has no name", node.op.as_str())));
            }
            if node.output.is_empty() {
                return Err(invalid(format!("{}: its output tensor has no name", node.describe())));
            }
            if shapes.contains_key(node.output.as_str()) {
                return Err(invalid(format!("{}: tensor '{}' is written twice", node.describe(), node.output)));
            }
            let mut ins = Vec::with_capacity(node.inputs.len());
            for name in &node.inputs {
                match shapes.get(name.as_str()) {
                    Some(s) => ins.push(s.as_slice()),
                    None => return Err(invalid(format!("{}: input '{name}' is not produced by any earlier node", node.describe()))),
                }
            }
            for (key, t) in &node.params {
                if let Some(t) = t {
                    let size: usize = t.shape.iter().product();
                    if t.data.len() != size {
                        return Err(invalid(format!(
                            "{}: parameter '{key}' of shape {:?} holds {} values, not {size}",
                            node.describe(),
                            t.shape,
                            t.data.len()
                        )));
                    }
                    if t.data.iter().any(|v| !v.is_finite()) {
                        return Err(invalid(format!("{}: parameter '{key}' has a value that is not finite", node.describe())));
                    }
                }
            }
            let inferred = infer(node, &ins)?;
            if inferred != node.shape {
                return Err(invalid(format!("{}: output shape {:?} written, {:?} inferred from its inputs", node.describe(), node.shape, inferred)));
            }
            shapes.insert(node.output.as_str(), inferred);
        }
        if !shapes.contains_key(self.output.as_str()) {
            return Err(invalid(format!("the output '{}' is not produced by any node", self.output)));
        }
        Ok(())
    }
}

fn conv_out(node: &GraphNode, size: usize, kernel: usize, stride: usize, lo: usize, hi: usize) -> Result<usize> {
    if stride == 0 {
        return Err(invalid(format!("{}: stride 0", node.describe())));
    }
    let n = (size + lo + hi) as i64 - kernel as i64;
    let out = n.div_euclid(stride as i64) + 1;
    Ok(out.max(0) as usize)
}

fn arity(node: &GraphNode, ins: &[&[usize]], want: usize) -> Result<()> {
    if ins.len() != want {
        return Err(invalid(format!("{}: reads {} tensors, takes {want}", node.describe(), ins.len())));
    }
    Ok(())
}

/// The output shape of `node` on inputs of shapes `ins` (ir.py's `_infer`), or why not.
fn infer(node: &GraphNode, ins: &[&[usize]]) -> Result<Vec<usize>> {
    let d = node.describe();
    let Some(&x) = ins.first() else {
        return Err(invalid(format!("{d}: reads no tensor")));
    };
    let a = &node.attrs;
    if matches!(node.op, NodeOp::Conv | NodeOp::Maxpool | NodeOp::Avgpool | NodeOp::Batchnorm | NodeOp::GlobalAvgpool) && x.len() != 3 {
        return Err(invalid(format!("{d}: expects a (C, H, W) input, got shape {x:?}")));
    }
    let vector = |key: &str, len: usize| -> Result<()> {
        if let Some(t) = node.param(key) {
            if t.shape != [len] {
                return Err(invalid(format!("{d}: {key} has shape {:?}, expected ({len},)", t.shape)));
            }
        }
        Ok(())
    };
    match node.op {
        NodeOp::Conv => {
            arity(node, ins, 1)?;
            let w = node.required("weight")?;
            if w.shape.len() != 4 {
                return Err(invalid(format!("{d}: weight must have shape (out, in/groups, kh, kw), got {:?}", w.shape)));
            }
            let groups = a.groups();
            if groups == 0 || x[0] != w.shape[1] * groups || w.shape[0] % groups != 0 {
                return Err(invalid(format!("{d}: weight {:?} with groups={groups} does not fit {} input channels", w.shape, x[0])));
            }
            if a.dilation.is_some_and(|dl| dl != [1, 1]) {
                return Err(invalid(format!("{d}: dilation other than 1 is not supported")));
            }
            vector("bias", w.shape[0])?;
            let (s, p) = (a.stride(), a.pads());
            let h = conv_out(node, x[1], w.shape[2], s[0], p[0], p[2])?;
            let wd = conv_out(node, x[2], w.shape[3], s[1], p[1], p[3])?;
            if h < 1 || wd < 1 {
                return Err(invalid(format!("{d}: output would be empty for input {x:?}")));
            }
            Ok(vec![w.shape[0], h, wd])
        }
        NodeOp::Batchnorm => {
            arity(node, ins, 1)?;
            for key in ["scale", "bias", "mean", "var"] {
                let t = node.required(key)?;
                if t.shape != [x[0]] {
                    return Err(invalid(format!("{d}: {key} has shape {:?}, expected ({},)", t.shape, x[0])));
                }
            }
            Ok(x.to_vec())
        }
        NodeOp::Poly => {
            arity(node, ins, 1)?;
            let c = node.required("coefficients")?;
            let fits = match c.shape.as_slice() {
                [n] => *n >= 1,
                [rows, n] => *n >= 1 && *rows == x[0],
                _ => false,
            };
            if !fits {
                return Err(invalid(format!(
                    "{d}: coefficients of shape {:?} do not fit input {x:?}: give (degree + 1,) for all values or ({}, degree + 1) per channel",
                    c.shape, x[0]
                )));
            }
            Ok(x.to_vec())
        }
        NodeOp::Relu => {
            arity(node, ins, 1)?;
            Ok(x.to_vec())
        }
        NodeOp::Clip => {
            arity(node, ins, 1)?;
            let (low, high) = (a.min.unwrap_or(0.0), a.max);
            if low != 0.0 || !high.is_some_and(|h| h.is_finite() && h > 0.0) {
                return Err(invalid(format!("{d}: attrs must be {{'min': 0.0, 'max': M}} with a finite M > 0, got min={low}, max={high:?}")));
            }
            Ok(x.to_vec())
        }
        NodeOp::Maxpool | NodeOp::Avgpool => {
            arity(node, ins, 1)?;
            let k = a.kernel.ok_or_else(|| invalid(format!("{d}: attribute 'kernel' is missing")))?;
            let (s, p) = (a.stride.unwrap_or(k), a.pads());
            Ok(vec![x[0], conv_out(node, x[1], k[0], s[0], p[0], p[2])?, conv_out(node, x[2], k[1], s[1], p[1], p[3])?])
        }
        NodeOp::GlobalAvgpool => {
            arity(node, ins, 1)?;
            Ok(vec![x[0], 1, 1])
        }
        NodeOp::Flatten => {
            arity(node, ins, 1)?;
            Ok(vec![x.iter().product()])
        }
        NodeOp::Linear => {
            arity(node, ins, 1)?;
            let w = node.required("weight")?;
            if w.shape.len() != 2 || x.len() != 1 || w.shape[1] != x[0] {
                return Err(invalid(format!("{d}: weight {:?} does not fit input shape {x:?} (flatten first)", w.shape)));
            }
            vector("bias", w.shape[0])?;
            Ok(vec![w.shape[0]])
        }
        NodeOp::Concat => {
            if ins.len() < 2 || ins.iter().any(|i| i.len() != 3 || i[1..] != x[1..]) {
                return Err(invalid(format!("{d}: channel concatenation needs (C, H, W) inputs of one spatial size, got {ins:?}")));
            }
            Ok(vec![ins.iter().map(|i| i[0]).sum(), x[1], x[2]])
        }
        NodeOp::Add => {
            if ins.len() != 2 || ins[0] != ins[1] {
                return Err(invalid(format!("{d}: residual addition needs two inputs of one shape, got {ins:?}")));
            }
            Ok(x.to_vec())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: NodeOp, name: &str, inputs: &[&str], shape: &[usize]) -> GraphNode {
        GraphNode {
            op,
            name: name.into(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            output: format!("{name}:o"),
            shape: shape.to_vec(),
            attrs: NodeAttrs::default(),
            params: BTreeMap::new(),
        }
    }

    fn graph(nodes: Vec<GraphNode>) -> ModelGraph {
        let output = nodes.last().map(|n| n.output.clone()).unwrap_or_default();
        ModelGraph { format: GRAPH_FORMAT.into(), version: GRAPH_VERSION, name: "g".into(), input: "x".into(), input_shape: vec![2, 4, 4], output, nodes }
    }

    fn conv() -> GraphNode {
        let mut c = node(NodeOp::Conv, "c", &["x"], &[3, 2, 2]);
        c.attrs.stride = Some([2, 2]);
        c.attrs.pads = Some([1, 1, 1, 1]);
        c.params.insert("weight".into(), Some(Tensor::new(vec![3, 2, 3, 3], vec![0.5; 54])));
        c.params.insert("bias".into(), None);
        c
    }

    #[test]
    fn a_valid_graph_round_trips() {
        let mut f = node(NodeOp::Flatten, "f", &["c:o"], &[12]);
        f.params.clear();
        let g = graph(vec![conv(), f]);
        g.validate().unwrap();
        assert_eq!(ModelGraph::from_json(&g.to_json()).unwrap(), g);
    }

    #[test]
    fn errors_name_the_node_and_the_reason() {
        let mut c = conv();
        c.shape = vec![3, 4, 4];
        let e = graph(vec![c]).validate().unwrap_err().to_string();
        assert!(e.contains("conv node 'c'") && e.contains("inferred"), "{e}");
        let mut c = conv();
        c.params.insert("weight".into(), Some(Tensor::new(vec![3, 2, 3, 3], vec![0.5; 53])));
        let e = graph(vec![c]).validate().unwrap_err().to_string();
        assert!(e.contains("'weight'") && e.contains("53 values"), "{e}");
        let mut c = conv();
        c.inputs = vec!["y".into()];
        let e = graph(vec![c]).validate().unwrap_err().to_string();
        assert!(e.contains("'y' is not produced"), "{e}");
        let e = graph(vec![conv(), conv()]).validate().unwrap_err().to_string();
        assert!(e.contains("written twice"), "{e}");
        let mut c = conv();
        c.params.insert("weight".into(), Some(Tensor::new(vec![3, 2, 3, 3], vec![f64::NAN; 54])));
        assert!(graph(vec![c]).validate().unwrap_err().to_string().contains("not finite"));
        let mut g = graph(vec![conv()]);
        g.version = 2;
        assert!(g.validate().unwrap_err().to_string().contains("version"));
        let e = ModelGraph::from_json(r#"{"format": "lycaon-graph"}"#).unwrap_err().to_string();
        assert!(e.contains("malformed graph JSON"), "{e}");
        let mut c = conv();
        c.attrs.kernel = Some([2, 2]);
        let mut j: serde_json::Value = serde_json::from_str(&graph(vec![c]).to_json()).unwrap();
        j["nodes"][0]["attrs"]["ceil_mode"] = 1.into();
        let e = ModelGraph::from_json(&j.to_string()).unwrap_err().to_string();
        assert!(e.contains("ceil_mode"), "{e}");
    }
}
