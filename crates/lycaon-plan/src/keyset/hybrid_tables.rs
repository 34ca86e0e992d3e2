//! Rotation tables of a hybrid (BFV) plan, one per parameter set: the Galois elements each
//! layer's algorithm uses, at its set's top level.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ChainParams, Phase, Rotation, RotationTable};
use crate::hybrid::{HybridPlan, ParamChoice};
use crate::PlanError;

/// The rotation table of the layers of a hybrid plan that share one BFV parameter set.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ParamSetTable {
    pub params: ParamChoice,
    pub chain: ChainParams,
    pub layers: Vec<String>,
    pub table: RotationTable,
}

/// Rotation tables of a hybrid plan, one per parameter set (rlwe identifies a parameter set by a
/// content hash that includes t, so layers with different t need their own keys). Every layer
/// runs at its set's top level (the client's fresh ciphertext). The plan records each layer's
/// Galois elements and its total rotation count, not the count per element: the count is split
/// evenly over the elements (the first ones take the remainder). Row rotations map back to steps
/// by the discrete logarithm base 3, the row swap to [`Rotation::Conjugate`].
pub fn hybrid_rotation_tables(plan: &HybridPlan) -> Result<Vec<ParamSetTable>, PlanError> {
    let mut groups: BTreeMap<ParamChoice, ParamSetTable> = BTreeMap::new();
    for layer in &plan.layers {
        let point = &layer.chosen;
        let elements: Vec<u64> = point.galois_elements.iter().copied().filter(|&g| g != 1).collect();
        if elements.is_empty() {
            continue;
        }
        let chain = ChainParams::from_param_choice(&point.params)?;
        let group = groups.entry(point.params.clone()).or_insert_with(|| ParamSetTable {
            params: point.params.clone(),
            chain: chain.clone(),
            layers: Vec::new(),
            table: RotationTable::new(chain.slots(), chain.max_level()),
        });
        group.layers.push(layer.name.clone());
        let per = point.rotations / elements.len() as u64;
        let extra = point.rotations % elements.len() as u64;
        for (i, &g) in elements.iter().enumerate() {
            let rotation = Rotation::from_galois_element(g, chain.n())?;
            let count = (per + u64::from((i as u64) < extra)).max(1);
            group.table.push(&layer.name, Phase::Network, rotation, chain.max_level(), count)?;
        }
    }
    Ok(groups.into_values().collect())
}
