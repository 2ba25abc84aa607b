//! The six CRDs (the four of `keda.sh` and the two of `eventing.keda.sh`) as `CustomResourceDefinition` objects and as the YAML committed under
//! `config/crd/` (one file per CRD, named `<group>_<plural>.yaml` like KEDA's generated files).
//!
//! kube-derive writes each CRD from the types; [`all`] then makes it admit, store and show what
//! KEDA's CRD does (`api/tests/keda_crd.rs` compares the two mechanically):
//!
//! - no `nullable` and no `title`: KEDA's schemas have neither, so a `null` field is pruned
//!   rather than stored;
//! - `apiVersion`, `kind` and `metadata` described at the top, and `listKind` named;
//! - the embedded Kubernetes types get the API's own constraints ([`kubernetes`]);
//! - a ScaledJob's triggers have no `metricType` (KEDA removes it: it is a ScaledObject field);
//! - no schema default where serde's is only a reading convenience
//!   (`status.triggersActivity.*.isActive`, a CloudEventSource's `eventSubscription`, `oauth2`'s
//!   `clientId` and `tokenUrl`, which KEDA requires).

mod kubernetes;
mod schema;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;
use k8s_openapi::api::batch::v1::JobSpec;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;

pub use kubernetes::QUANTITY_PATTERN;

use crate::cloud_event_source::{CloudEventSource, ClusterCloudEventSource};
use crate::{ClusterTriggerAuthentication, ScaledJob, ScaledObject, TriggerAuthentication};

/// The command that regenerates the committed CRD files.
pub const REGENERATE_COMMAND: &str = "cargo run -p keda-api --bin crdgen -- --out config/crd";

/// All six CRDs, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        conformed(ScaledObject::crd(), |s| {
            if let Some(behavior) =
                schema::at_mut(s, ".spec.advanced.horizontalPodAutoscalerConfig.behavior")
            {
                kubernetes::conform::<HorizontalPodAutoscalerBehavior>(behavior);
            }
            no_default(s, ".status.triggersActivity{*}.isActive");
        }),
        conformed(ScaledJob::crd(), |s| {
            if let Some(job) = schema::at_mut(s, ".spec.jobTargetRef") {
                kubernetes::conform::<JobSpec>(job);
            }
            if let Some(trigger) = schema::at_mut(s, ".spec.triggers[]")
                && let Some(properties) = trigger.properties.as_mut()
            {
                properties.remove("metricType");
            }
            no_default(s, ".status.triggersActivity{*}.isActive");
        }),
        conformed(TriggerAuthentication::crd(), oauth2_required),
        conformed(ClusterTriggerAuthentication::crd(), oauth2_required),
        conformed(CloudEventSource::crd(), |s| {
            no_default(s, ".spec.eventSubscription");
        }),
        conformed(ClusterCloudEventSource::crd(), |s| {
            no_default(s, ".spec.eventSubscription");
        }),
    ]
}

/// KEDA requires `oauth2.type`, `clientId` and `tokenUrl` (`type` has a default, so it may be
/// left out); serde reads them leniently so that validation names what is missing.
fn oauth2_required(schema: &mut JSONSchemaProps) {
    if let Some(oauth2) = schema::at_mut(schema, ".spec.oauth2") {
        for field in ["clientId", "tokenUrl", "type"] {
            schema::require(oauth2, field);
        }
    }
    no_default(schema, ".spec.oauth2.clientId");
    no_default(schema, ".spec.oauth2.tokenUrl");
}

fn no_default(schema: &mut JSONSchemaProps, path: &str) {
    if let Some(node) = schema::at_mut(schema, path) {
        node.default = None;
    }
}

/// The steps every CRD takes, then `specific` on its schema.
fn conformed(
    mut crd: CustomResourceDefinition,
    specific: impl Fn(&mut JSONSchemaProps),
) -> CustomResourceDefinition {
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    let group = crd.spec.group.clone();
    for version in &mut crd.spec.versions {
        let api_version = format!(
            "The versioned schema of this object: `{group}/{}`.",
            version.name
        );
        let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        specific(root);
        schema::for_each_mut(root, &mut |s| {
            s.nullable = None;
            s.title = None;
        });
        let properties = root.properties.get_or_insert_with(Default::default);
        let top = |type_: &str, description: &str| JSONSchemaProps {
            type_: Some(type_.to_string()),
            description: Some(description.to_string()),
            ..JSONSchemaProps::default()
        };
        properties.insert("apiVersion".to_string(), top("string", &api_version));
        properties.insert(
            "kind".to_string(),
            top("string", "The kind of this object."),
        );
        properties.insert(
            "metadata".to_string(),
            top("object", "Standard object metadata."),
        );
    }
    crd
}

/// The file name of a CRD: `<group>_<plural>.yaml`, e.g. `keda.sh_scaledobjects.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// One CRD as a YAML document (starting with `---`), the exact content of its committed file.
///
/// # Errors
/// When serialization fails (it does not for these types).
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_yaml::Error> {
    Ok(format!(
        "# Generated by `{REGENERATE_COMMAND}`; do not edit.\n---\n{}",
        serde_yaml::to_string(crd)?
    ))
}
