//! Kubernetes' own types embedded in our CRDs (a ScaledJob's `jobTargetRef`, a ScaledObject's
//! HPA `behavior`) get the constraints the Kubernetes API declares for them and k8s-openapi's
//! schemas leave out, so that the API server admits, refuses and stores what it does with
//! KEDA's CRDs (whose schemas controller-gen writes from k8s.io/api):
//!
//! - quantities carry the quantity pattern, and quantities and int-or-strings the
//!   `anyOf: [integer, string]` of a structural schema;
//! - the lists the API keeps as maps (`containers` by name, `ports` by port and protocol, ...)
//!   are `x-kubernetes-list-type: map`, so duplicate keys are refused;
//! - the defaults the API declares (`protocol: TCP`, an optional reference's `name: ""`, ...)
//!   are written into the stored object, and the names those defaults make optional are not
//!   required;
//! - what KEDA's kustomize patches add: a pod template's `metadata` kept as written, `protocol`
//!   required of a port, the HPA's 0 to 3600 s stabilization windows.
//!
//! The rules are by type name: a second schema of the embedded type is generated with
//! references (`$ref` to `io.k8s.api.core.v1.Container`, ...) and walked beside the inlined one
//! the CRD holds, so each rule lands wherever its type is used.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSON, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::schema::{require, unrequire};

/// The Kubernetes API's pattern of a `resource.Quantity`.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const POD_TEMPLATE_SPEC: &str = "io.k8s.api.core.v1.PodTemplateSpec";

/// Deepest nesting walked; the embedded types are not recursive, this only bounds a mistake.
const MAX_DEPTH: usize = 64;

/// Applies the rules to `inline`, the CRD's inlined schema of `T`.
pub(crate) fn conform<T: JsonSchema>(inline: &mut JSONSchemaProps) {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = false;
        })
        .into_generator();
    let root = generator.root_schema_for::<T>().to_value();
    let empty = Map::new();
    let defs = root
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let name = T::schema_name();
    walk(inline, &root, defs, Some(name.as_ref()), None, None, 0);
}

/// Follows `$ref`s to the definition; the type name is the last reference's.
fn resolve<'v>(
    mut node: &'v Value,
    defs: &'v Map<String, Value>,
    mut name: Option<&'v str>,
) -> (&'v Value, Option<&'v str>) {
    for _ in 0..MAX_DEPTH {
        let Some(target) = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next())
        else {
            break;
        };
        let Some(def) = defs.get(target) else {
            break;
        };
        node = def;
        name = Some(target);
    }
    (node, name)
}

fn walk(
    inline: &mut JSONSchemaProps,
    node: &Value,
    defs: &Map<String, Value>,
    own: Option<&str>,
    parent: Option<&str>,
    field: Option<&str>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let (node, own) = resolve(node, defs, own);
    if let Some(own) = own {
        apply(own, parent, field, inline);
    }
    if let (Some(props), Some(inline_props)) = (
        node.get("properties").and_then(Value::as_object),
        inline.properties.as_mut(),
    ) {
        for (name, sub) in props {
            if let Some(inline_sub) = inline_props.get_mut(name) {
                walk(inline_sub, sub, defs, None, own, Some(name), depth + 1);
            }
        }
    }
    if let (Some(items), Some(JSONSchemaPropsOrArray::Schema(inline_items))) =
        (node.get("items"), inline.items.as_mut())
    {
        walk(inline_items, items, defs, None, own, field, depth + 1);
    }
    if let (Some(values @ Value::Object(_)), Some(JSONSchemaPropsOrBool::Schema(inline_values))) = (
        node.get("additionalProperties"),
        inline.additional_properties.as_mut(),
    ) {
        walk(inline_values, values, defs, None, own, field, depth + 1);
    }
}

fn property<'s>(schema: &'s mut JSONSchemaProps, name: &str) -> Option<&'s mut JSONSchemaProps> {
    schema.properties.as_mut()?.get_mut(name)
}

fn list_map(schema: &mut JSONSchemaProps, field: &str, keys: &[&str]) {
    if let Some(list) = property(schema, field) {
        list.x_kubernetes_list_type = Some("map".to_string());
        list.x_kubernetes_list_map_keys = Some(keys.iter().map(|k| (*k).to_string()).collect());
    }
}

fn list_type(schema: &mut JSONSchemaProps, field: &str, kind: &str) {
    if let Some(list) = property(schema, field) {
        list.x_kubernetes_list_type = Some(kind.to_string());
    }
}

fn default(schema: &mut JSONSchemaProps, field: &str, value: Value) {
    if let Some(prop) = property(schema, field) {
        prop.default = Some(JSON(value));
    }
}

fn int_or_string() -> Vec<JSONSchemaProps> {
    ["integer", "string"]
        .iter()
        .map(|t| JSONSchemaProps {
            type_: Some((*t).to_string()),
            ..JSONSchemaProps::default()
        })
        .collect()
}

/// The rules of one type, applied where the type is used (`parent.field`).
fn apply(own: &str, parent: Option<&str>, field: Option<&str>, schema: &mut JSONSchemaProps) {
    let Some(short) = own.strip_prefix("io.k8s.") else {
        return;
    };
    match short {
        _ if own == QUANTITY => {
            schema.any_of = Some(int_or_string());
            schema.pattern = Some(QUANTITY_PATTERN.to_string());
            schema.x_kubernetes_int_or_string = Some(true);
        }
        _ if own == INT_OR_STRING => {
            schema.any_of = Some(int_or_string());
            schema.x_kubernetes_int_or_string = Some(true);
        }
        // An embedded ObjectMeta keeps the fields an object template may set (what
        // controller-gen writes for it, so what KEDA's API server keeps); KEDA's
        // scaledjob_patch.yaml keeps the rest of a pod template's metadata as written.
        _ if own == OBJECT_META => {
            if let Some(props) = schema.properties.as_mut() {
                props.retain(|name, _| {
                    ["annotations", "finalizers", "labels", "name", "namespace"]
                        .contains(&name.as_str())
                });
            }
            if parent == Some(POD_TEMPLATE_SPEC) && field == Some("metadata") {
                schema.x_kubernetes_preserve_unknown_fields = Some(true);
            }
        }
        "api.core.v1.PodSpec" => {
            for list in ["containers", "initContainers", "ephemeralContainers"] {
                list_map(schema, list, &["name"]);
            }
            list_map(schema, "hostAliases", &["ip"]);
            list_map(schema, "imagePullSecrets", &["name"]);
            list_map(schema, "resourceClaims", &["name"]);
            list_map(schema, "schedulingGates", &["name"]);
            list_map(
                schema,
                "topologySpreadConstraints",
                &["topologyKey", "whenUnsatisfiable"],
            );
            list_map(schema, "volumes", &["name"]);
        }
        "api.core.v1.Container" | "api.core.v1.EphemeralContainer" => {
            list_map(schema, "env", &["name"]);
            list_map(schema, "ports", &["containerPort", "protocol"]);
            list_map(schema, "volumeDevices", &["devicePath"]);
            list_map(schema, "volumeMounts", &["mountPath"]);
        }
        "api.core.v1.ResourceRequirements" => list_map(schema, "claims", &["name"]),
        // Defaulted, and required by KEDA's patch: a port list's key.
        "api.core.v1.ContainerPort" => {
            default(schema, "protocol", json!("TCP"));
            require(schema, "protocol");
        }
        // References whose name the API lets the user leave out (`name: ""`).
        "api.core.v1.LocalObjectReference"
        | "api.core.v1.SecretKeySelector"
        | "api.core.v1.ConfigMapKeySelector"
        | "api.core.v1.SecretEnvSource"
        | "api.core.v1.ConfigMapEnvSource"
        | "api.core.v1.ConfigMapVolumeSource"
        | "api.core.v1.ConfigMapProjection"
        | "api.core.v1.SecretProjection" => {
            unrequire(schema, "name");
            default(schema, "name", json!(""));
        }
        "api.core.v1.GRPCAction" => default(schema, "service", json!("")),
        "api.core.v1.AzureDiskVolumeSource" => {
            default(schema, "fsType", json!("ext4"));
            default(schema, "readOnly", json!(false));
        }
        "api.core.v1.ISCSIVolumeSource" => default(schema, "iscsiInterface", json!("default")),
        "api.core.v1.RBDVolumeSource" => {
            default(schema, "keyring", json!("/etc/ceph/keyring"));
            default(schema, "pool", json!("rbd"));
            default(schema, "user", json!("admin"));
        }
        "api.core.v1.ScaleIOVolumeSource" => {
            default(schema, "fsType", json!("xfs"));
            default(schema, "storageMode", json!("ThinProvisioned"));
        }
        // Optional in k8s.io/api 0.35 (KEDA's); k8s-openapi's 1.33 schema requires it.
        "api.batch.v1.PodFailurePolicyOnPodConditionsPattern" => unrequire(schema, "status"),
        "api.batch.v1.PodFailurePolicyOnExitCodesRequirement" => list_type(schema, "values", "set"),
        // KEDA's scaledobject_patch.yaml: the HPA's own bounds on the windows.
        "api.autoscaling.v2.HPAScalingRules" => {
            list_type(schema, "policies", "atomic");
            if let Some(window) = property(schema, "stabilizationWindowSeconds") {
                window.minimum = Some(0.0);
                window.maximum = Some(3600.0);
            }
        }
        _ => {}
    }
}
