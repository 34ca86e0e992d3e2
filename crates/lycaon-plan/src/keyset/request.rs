//! The JSON entry point of the keyset planner (what `lycaon._native.keyset_json` calls).

use serde::{Deserialize, Serialize};

use super::{
    fhe_rotation_table, hybrid_keyset_report, keyset_report, resnet20_keyset_report, ActivationKind, FheNetwork, FheParams, KeySwitchCostModel, Phase,
};
use crate::hybrid::HybridPlan;
use crate::PlanError;

/// A keyset request from the Python side.
#[derive(Clone, Debug, Default, Deserialize)]
struct KeysetRequest {
    /// "resnet20" (default) when no network or hybrid plan is given.
    #[serde(default)]
    model: Option<String>,
    /// A preset name ("joo2024", "lycaon") or an explicit FheParams object.
    #[serde(default)]
    params: Option<serde_json::Value>,
    /// "aespa", "composite_relu", or "both" (default).
    #[serde(default)]
    activation: Option<String>,
    /// An explicit FHE-mode network instead of ResNet-20.
    #[serde(default)]
    network: Option<FheNetwork>,
    /// A hybrid plan (the JSON of `plan_json`): keys per parameter set.
    #[serde(default)]
    hybrid_plan: Option<HybridPlan>,
    /// A key-switch cost model (the `model` of `examples/keyset.rs --calibrate`'s output, say)
    /// instead of the recorded one.
    #[serde(default)]
    cost_model: Option<KeySwitchCostModel>,
    /// Refused with an explanation: measuring rotations needs real keys, which this crate never
    /// makes; pass `cost_model` instead.
    #[serde(default)]
    calibrate: bool,
    /// Include the (rotation, level, count) rows.
    #[serde(default)]
    table: bool,
}

/// JSON entry point. Request: {"model": "resnet20", "params": "joo2024" | "lycaon" | {FheParams},
/// "activation": "aespa" | "composite_relu" | "both", "network": {FheNetwork}, "hybrid_plan":
/// {HybridPlan}, "cost_model": {KeySwitchCostModel}, "table": false}. Returns an [`super::FheKeysetReport`] (with the
/// comparison to 004 for ResNet-20), {"network": ..., "level_plan": ..., "keysets": ...} for a
/// given network, or a [`super::HybridKeysetReport`] for a hybrid plan.
pub fn keyset_json(request: &str) -> Result<String, PlanError> {
    let req: KeysetRequest = serde_json::from_str(request).map_err(|e| PlanError::Invalid(format!("malformed keyset request: {e}")))?;
    let params = match &req.params {
        None => FheParams::joo2024_table1(),
        Some(serde_json::Value::String(name)) => FheParams::by_name(name)?,
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| PlanError::Invalid(format!("params must be a preset name or an FheParams object: {e}")))?,
    };
    params.validate()?;
    if req.calibrate {
        return Err(PlanError::Invalid(
            "\"calibrate\" is not supported here: measuring rotations needs real keys and the planner never holds one; run `cargo run --release -p lycaon-plan --example keyset -- --calibrate` and pass its model as \"cost_model\"".into(),
        ));
    }
    let cost = req.cost_model.clone().unwrap_or_else(KeySwitchCostModel::recorded);
    if let Some(plan) = &req.hybrid_plan {
        return to_json(&hybrid_keyset_report(plan, &cost)?);
    }
    if let Some(network) = &req.network {
        let (table, level_plan) = fhe_rotation_table(network, &params)?;
        let keysets = keyset_report(&table, &params.chain, &cost.at_log_n(params.chain.log_n), req.table)?;
        let network_only = keyset_report(&table.phase(Phase::Network), &params.chain, &cost.at_log_n(params.chain.log_n), false)?;
        return serde_json::to_string(
            &serde_json::json!({"network": network.name, "params": params, "level_plan": level_plan, "keysets": keysets, "network_keysets": network_only}),
        )
        .map_err(|e| PlanError::Io(e.to_string()));
    }
    match req.model.as_deref().unwrap_or("resnet20") {
        "resnet20" | "resnet-20" => {}
        other => return Err(PlanError::UnknownModel { name: other.into(), known: "resnet20 (or pass \"network\" or \"hybrid_plan\")".into() }),
    }
    let activations = match req.activation.as_deref().unwrap_or("both") {
        "both" => vec![ActivationKind::Aespa, ActivationKind::CompositeRelu],
        one => vec![ActivationKind::parse(one)?],
    };
    to_json(&resnet20_keyset_report(&params, &activations, &cost, req.table)?)
}

fn to_json<T: Serialize>(value: &T) -> Result<String, PlanError> {
    serde_json::to_string(value).map_err(|e| PlanError::Io(e.to_string()))
}
