//! Bootstrapping placement (002 Fig. 1) over a sequence of ops whose depths are known: every
//! tensor carries its level; a refresh plan names, before each op, the inputs to refresh
//! (multiply by 1/B: one level; bootstrap to the top residual level; multiply by B, one more
//! level when B < 1). Two rules (Python's `FheResNet._greedy_refreshes` and
//! `_fewest_refreshes`, decision for decision):
//!
//! - greedy: refresh on demand, before an op of depth d each input with fewer than d + 1 levels
//!   (one kept for a later refresh's own scaling);
//! - fewest: a dynamic program over the levels of the tensors still to be read, for the fewest
//!   bootstraps (those inside composite ReLUs included), then the highest output level; exact
//!   levels (an op needs its depth, a refresh one level).
//!
//! A composite ReLU has depth 0 here; its own bootstraps and output level come from
//! [`composite_relu_schedule`].

use std::collections::HashMap;

use super::fail;
use crate::fhe::program::composite_relu_schedule;
use crate::Result;

/// What placement needs of an op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedOp {
    pub name: String,
    pub inputs: Vec<String>,
    pub output: String,
    /// Levels consumed (0 for a composite ReLU).
    pub depth: usize,
    /// A composite ReLU (its schedule gives its output level).
    pub relu: bool,
}

/// The level rules: the top residual level, the composite ReLU's stage depths, and the level a
/// tensor has after its refresh.
pub struct Levels<'a> {
    pub top: usize,
    pub relu_depths: &'a [usize],
    /// Level after a refresh, by tensor (the top, or one less when its bound is below 1).
    pub refreshed: &'a HashMap<String, usize>,
}

/// Before each op, the tensors refreshed (each once, in the order the op reads them).
pub type RefreshPlan = Vec<Vec<String>>;

/// A state of the search for the fewest bootstraps: the (tensor, level) pairs still to be read,
/// sorted by name.
type State = Vec<(String, usize)>;

/// A state with its cost (bootstraps) and plan so far.
type Entry = (State, (usize, RefreshPlan));

fn unique(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

fn level_of(levels: &HashMap<String, usize>, op: &PlacedOp, name: &str) -> Result<usize> {
    levels.get(name).copied().ok_or_else(|| fail(format!("{}: input '{name}' is not written by an earlier op", op.name)))
}

impl Levels<'_> {
    pub fn refreshed_level(&self, name: &str) -> Result<usize> {
        self.refreshed.get(name).copied().ok_or_else(|| fail(format!("tensor '{name}' has no value bound; pass the calibrated bounds of every tensor")))
    }

    /// The level `op` leaves its output at when it reads at `level`.
    pub fn output_level(&self, op: &PlacedOp, level: usize) -> Result<usize> {
        if op.relu {
            return composite_relu_schedule(self.relu_depths, level, self.top).map(|s| s.1).map_err(|e| fail(format!("{}: {}", op.name, strip(&e))));
        }
        level.checked_sub(op.depth).ok_or_else(|| fail(format!("{}: reads at level {level}, needs {}", op.name, op.depth)))
    }

    /// Bootstraps inside a composite ReLU reading at `level`.
    pub fn relu_bootstraps(&self, level: usize) -> Result<usize> {
        Ok(composite_relu_schedule(self.relu_depths, level, self.top)?.0.iter().filter(|&&f| f).count())
    }

    /// Refresh on demand (module docs).
    pub fn greedy(&self, ops: &[PlacedOp], inputs: &[String]) -> Result<RefreshPlan> {
        let mut levels: HashMap<String, usize> = inputs.iter().map(|i| (i.clone(), self.top)).collect();
        let mut plan = Vec::with_capacity(ops.len());
        for op in ops {
            let mut low = Vec::new();
            for name in unique(&op.inputs) {
                if level_of(&levels, op, &name)? < op.depth + 1 {
                    low.push(name);
                }
            }
            for name in &low {
                levels.insert(name.clone(), self.refreshed_level(name)?);
            }
            let lvl = self.read_level(&levels, op)?;
            levels.insert(op.output.clone(), self.output_level(op, lvl)?);
            plan.push(low);
        }
        Ok(plan)
    }

    fn read_level(&self, levels: &HashMap<String, usize>, op: &PlacedOp) -> Result<usize> {
        let mut lvl = usize::MAX;
        for n in &op.inputs {
            lvl = lvl.min(level_of(levels, op, n)?);
        }
        if lvl == usize::MAX {
            return Err(fail(format!("{}: reads no tensor", op.name)));
        }
        Ok(lvl)
    }

    /// The fewest bootstraps (module docs). Ties keep the first plan found in Python's order
    /// (states in the order they were first reached, refresh choices by ascending bit mask),
    /// then the highest level of `output`.
    pub fn fewest(&self, ops: &[PlacedOp], inputs: &[String], output: &str) -> Result<RefreshPlan> {
        let mut last_read: HashMap<&str, usize> = HashMap::from([(output, ops.len())]);
        for (i, op) in ops.iter().enumerate() {
            for n in &op.inputs {
                let e = last_read.entry(n.as_str()).or_insert(i);
                *e = (*e).max(i);
            }
        }
        // States insertion-ordered, as a Python dict.
        let mut states: Vec<Entry> = vec![(inputs.iter().map(|i| (i.clone(), self.top)).collect(), (0, vec![]))];
        for (i, op) in ops.iter().enumerate() {
            let inputs = unique(&op.inputs);
            let mut following: Vec<Entry> = Vec::new();
            let mut position: HashMap<State, usize> = HashMap::new();
            for (state, (cost, plan)) in &states {
                for mask in 0u32..(1 << inputs.len()) {
                    let chosen: Vec<String> = inputs.iter().enumerate().filter(|(j, _)| mask >> j & 1 == 1).map(|(_, n)| n.clone()).collect();
                    let mut levels: Vec<(String, usize)> = state.clone();
                    let get = |levels: &[(String, usize)], n: &str| levels.iter().find(|e| e.0 == n).map(|e| e.1);
                    let mut skip = false;
                    for n in &chosen {
                        match get(&levels, n) {
                            Some(l) if l >= 1 => {}
                            Some(_) => skip = true,
                            None => return Err(fail(format!("{}: input '{n}' is not written by an earlier op", op.name))),
                        }
                    }
                    if skip {
                        continue;
                    }
                    for n in &chosen {
                        let l = self.refreshed_level(n)?;
                        if let Some(e) = levels.iter_mut().find(|e| e.0 == *n) {
                            e.1 = l;
                        }
                    }
                    let mut lvl = usize::MAX;
                    for n in &inputs {
                        lvl = lvl.min(get(&levels, n).ok_or_else(|| fail(format!("{}: input '{n}' is not written by an earlier op", op.name)))?);
                    }
                    if lvl < op.depth {
                        continue;
                    }
                    // An op whose level plan cannot hold it (a composite ReLU that fits no
                    // schedule) is no successor.
                    let Ok(out_level) = self.output_level(op, lvl) else { continue };
                    let extra = if op.relu { self.relu_bootstraps(lvl)? } else { 0 };
                    match levels.iter_mut().find(|e| e.0 == op.output) {
                        Some(e) => e.1 = out_level,
                        None => levels.push((op.output.clone(), out_level)),
                    }
                    let mut key: State = levels.into_iter().filter(|(n, _)| last_read.get(n.as_str()).is_some_and(|&r| r > i)).collect();
                    key.sort();
                    let value_cost = cost + chosen.len() + extra;
                    match position.get(&key) {
                        Some(&p) => {
                            if value_cost < following[p].1 .0 {
                                let mut next = plan.clone();
                                next.push(chosen);
                                following[p].1 = (value_cost, next);
                            }
                        }
                        None => {
                            let mut next = plan.clone();
                            next.push(chosen);
                            position.insert(key.clone(), following.len());
                            following.push((key, (value_cost, next)));
                        }
                    }
                }
            }
            if following.is_empty() {
                return Err(fail(format!("{}: no refresh plan gives this step its {} levels", op.name, op.depth)));
            }
            states = following;
        }
        let out_level = |s: &State| s.iter().find(|e| e.0 == output).map_or(0, |e| e.1);
        let mut best: Option<&Entry> = None;
        for s in &states {
            // Python's min: the first of the least (cost, -output level).
            if best.is_none_or(|b| (s.1 .0, std::cmp::Reverse(out_level(&s.0))) < (b.1 .0, std::cmp::Reverse(out_level(&b.0)))) {
                best = Some(s);
            }
        }
        Ok(best.map(|b| b.1 .1.clone()).unwrap_or_default())
    }

    /// The level each op reads at under `plan` (after its refreshes).
    pub fn op_levels(&self, ops: &[PlacedOp], inputs: &[String], plan: &RefreshPlan) -> Result<Vec<usize>> {
        let mut levels: HashMap<String, usize> = inputs.iter().map(|i| (i.clone(), self.top)).collect();
        let mut out = Vec::with_capacity(ops.len());
        for (op, refresh) in ops.iter().zip(plan) {
            for name in refresh {
                levels.insert(name.clone(), self.refreshed_level(name)?);
            }
            let lvl = self.read_level(&levels, op)?;
            out.push(lvl);
            levels.insert(op.output.clone(), self.output_level(op, lvl)?);
        }
        Ok(out)
    }
}

/// The message of a program error without its "invalid program: " prefix.
fn strip(e: &crate::RuntimeError) -> String {
    match e {
        crate::RuntimeError::Program(m) => m.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, inputs: &[&str], depth: usize) -> PlacedOp {
        PlacedOp { name: name.into(), inputs: inputs.iter().map(|s| s.to_string()).collect(), output: name.into(), depth, relu: false }
    }

    /// The network's input, one ciphertext.
    fn x() -> Vec<String> {
        vec!["x".to_string()]
    }

    fn refreshed(names: &[&str], level: usize) -> HashMap<String, usize> {
        names.iter().map(|n| (n.to_string(), level)).collect()
    }

    /// A residual block: x -> a (2) -> b (1) -> c (2) -> add(c, x) -> d (1), top 4.
    fn block() -> Vec<PlacedOp> {
        vec![op("a", &["x"], 2), op("b", &["a"], 1), op("c", &["b"], 2), op("add", &["c", "x"], 0), op("d", &["add"], 1)]
    }

    #[test]
    fn greedy_refreshes_on_demand() {
        let r = refreshed(&["x", "a", "b", "c", "add"], 4);
        let lv = Levels { top: 4, relu_depths: &[], refreshed: &r };
        // x at 4 -> a at 2 -> b: 2 >= 2 ok -> 1 -> c needs 3: refresh b -> 4 -> c 2;
        // add reads min(c 2, x 4) = 2 -> 2; d needs 2: ok -> 1.
        let plan = lv.greedy(&block(), &x()).unwrap();
        assert_eq!(plan, vec![vec![], vec![], vec!["b".to_string()], vec![], vec![]]);
        assert_eq!(lv.op_levels(&block(), &x(), &plan).unwrap(), [4, 2, 4, 2, 2]);
    }

    #[test]
    fn fewest_never_beats_itself_and_prefers_the_higher_output() {
        let r = refreshed(&["x", "a", "b", "c", "add"], 4);
        let lv = Levels { top: 4, relu_depths: &[], refreshed: &r };
        let plan = lv.fewest(&block(), &x(), "d").unwrap();
        assert_eq!(plan.iter().map(Vec::len).sum::<usize>(), 1);
        // One refresh: refreshing b (as greedy) leaves d at 1; refreshing a or c would not fit
        // as well; among plans with one bootstrap the highest output level wins.
        let levels = lv.op_levels(&block(), &x(), &plan).unwrap();
        assert!(levels.iter().zip(block()).all(|(&l, o)| l >= o.depth));
        // A chain with top 3: p leaves 1 level, q needs a refresh before it (greedy: keep one
        // level; fewest: else r finds q at 0, too low to refresh).
        let chain = vec![op("p", &["x"], 2), op("q", &["p"], 1), op("r", &["q"], 1)];
        let r2 = refreshed(&["x", "p", "q"], 3);
        let lv2 = Levels { top: 3, relu_depths: &[], refreshed: &r2 };
        let g = lv2.greedy(&chain, &x()).unwrap();
        let f = lv2.fewest(&chain, &x(), "r").unwrap();
        assert_eq!(g, vec![vec![], vec!["p".to_string()], vec![]]);
        assert_eq!(f, g);
        // Top 2: p leaves q nothing and cannot be refreshed at level 0.
        let r3 = refreshed(&["x", "p", "q"], 2);
        let lv3 = Levels { top: 2, relu_depths: &[], refreshed: &r3 };
        let e = lv3.fewest(&chain, &x(), "r").unwrap_err().to_string();
        assert!(e.contains("q: no refresh plan"), "{e}");
    }

    #[test]
    fn refreshes_land_one_level_lower_below_a_bound_of_one() {
        let mut r = refreshed(&["x", "a", "add"], 4);
        r.insert("b".into(), 3);
        let lv = Levels { top: 4, relu_depths: &[], refreshed: &r };
        // b refreshed to 3 only: c at 3 -> 1; add at 1; d needs 2: refresh add.
        let plan = lv.greedy(&block(), &x()).unwrap();
        assert_eq!(plan, vec![vec![], vec![], vec!["b".to_string()], vec![], vec!["add".to_string()]]);
        assert_eq!(lv.op_levels(&block(), &x(), &plan).unwrap(), [4, 2, 3, 1, 4]);
        let r = refreshed(&["x"], 4);
        let lv = Levels { top: 4, relu_depths: &[], refreshed: &r };
        let e = lv.greedy(&[op("a", &["x"], 4), op("b", &["a"], 1)], &x()).unwrap_err().to_string();
        assert!(e.contains("'a' has no value bound"), "{e}");
    }

    #[test]
    fn composite_relus_place_their_own_bootstraps() {
        let r = refreshed(&["x", "a", "relu"], 10);
        let depths = [4, 4, 5];
        let lv = Levels { top: 10, relu_depths: &depths, refreshed: &r };
        let mut relu = op("relu", &["a"], 0);
        relu.relu = true;
        let ops = vec![op("a", &["x"], 9), relu, op("b", &["relu"], 2)];
        // a leaves level 1: the ReLU reads at 1 (x / B), bootstraps u and before the last stage.
        let plan = lv.greedy(&ops, &x()).unwrap();
        assert_eq!(lv.op_levels(&ops, &x(), &plan).unwrap(), [10, 1, 4]);
        assert_eq!(lv.relu_bootstraps(1).unwrap(), 2);
        let f = lv.fewest(&ops, &x(), "b").unwrap();
        assert_eq!(f.iter().map(Vec::len).sum::<usize>(), 0);
        // Greedy refreshes an input left at level 0 before the ReLU (x / B needs a level).
        assert_eq!(lv.greedy(&[op("a", &["x"], 10), ops[1].clone()], &x()).unwrap(), vec![vec!["x".to_string()], vec!["a".to_string()]]);
        let e = lv.output_level(&ops[1], 0).unwrap_err().to_string();
        assert!(e.contains("relu: a composite ReLU needs its input at level 1"), "{e}");
    }
}
