//! The embedded Kubernetes types (`spec.jobTargetRef` of ScaledJob, the HPA `behavior` of
//! ScaledObject): the constraints KEDA's CRDs carry in them, checked rule by rule.

use super::*;

/// The quantity pattern of the Kubernetes API (`resource.Quantity`).
pub(super) const QUANTITY: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Constraints KEDA's CRDs carry inside the embedded Kubernetes types, one per rule keda-rs
/// applies (`keda_api::crd`): the Kubernetes API's own markers and defaults that k8s-openapi's
/// schemas leave out, and KEDA's kustomize patches. `null`: the key is absent.
pub(super) fn embedded_facts() -> Vec<(&'static str, String, &'static str, Value)> {
    let behavior = ".spec.advanced.horizontalPodAutoscalerConfig.behavior";
    let pod = ".spec.jobTargetRef.template.spec";
    let int_or_string = json!([{"type": "integer"}, {"type": "string"}]);
    let so = "scaledobjects";
    let sj = "scaledjobs";
    vec![
        // KEDA's scaledobject_patch.yaml: the HPA's own bounds on the windows.
        (
            so,
            format!("{behavior}.scaleUp.stabilizationWindowSeconds"),
            "minimum",
            json!(0),
        ),
        (
            so,
            format!("{behavior}.scaleDown.stabilizationWindowSeconds"),
            "maximum",
            json!(3600),
        ),
        (
            so,
            format!("{behavior}.scaleDown.policies"),
            "x-kubernetes-list-type",
            json!("atomic"),
        ),
        (
            so,
            format!("{behavior}.scaleUp.tolerance"),
            "pattern",
            json!(QUANTITY),
        ),
        (
            so,
            format!("{behavior}.scaleUp.tolerance"),
            "anyOf",
            int_or_string.clone(),
        ),
        (
            so,
            format!("{behavior}.scaleUp.tolerance"),
            "nullable",
            Value::Null,
        ),
        // KEDA's scaledjob_patch.yaml: the template's metadata is kept as written; ports need a
        // protocol (defaulted to TCP); ScaledJob triggers have no metricType.
        (
            sj,
            ".spec.jobTargetRef.template.metadata".into(),
            "x-kubernetes-preserve-unknown-fields",
            json!(true),
        ),
        (
            sj,
            ".spec.jobTargetRef.template.metadata".into(),
            "properties",
            json!(["annotations", "finalizers", "labels", "name", "namespace"]),
        ),
        (
            sj,
            format!("{pod}.containers[].ports[]"),
            "required",
            json!(["containerPort", "protocol"]),
        ),
        (
            sj,
            format!("{pod}.initContainers[].ports[].protocol"),
            "default",
            json!("TCP"),
        ),
        (
            sj,
            ".spec.triggers[]".into(),
            "properties",
            json!([
                "authenticationRef",
                "metadata",
                "name",
                "type",
                "useCachedMetrics"
            ]),
        ),
        // Lists the API server keeps as maps: duplicate keys are refused.
        (
            sj,
            format!("{pod}.containers"),
            "x-kubernetes-list-map-keys",
            json!(["name"]),
        ),
        (
            sj,
            format!("{pod}.containers[].env"),
            "x-kubernetes-list-type",
            json!("map"),
        ),
        (
            sj,
            format!("{pod}.containers[].ports"),
            "x-kubernetes-list-map-keys",
            json!(["containerPort", "protocol"]),
        ),
        (
            sj,
            format!("{pod}.ephemeralContainers[].volumeMounts"),
            "x-kubernetes-list-map-keys",
            json!(["mountPath"]),
        ),
        (
            sj,
            format!("{pod}.initContainers[].volumeDevices"),
            "x-kubernetes-list-map-keys",
            json!(["devicePath"]),
        ),
        (
            sj,
            format!("{pod}.volumes"),
            "x-kubernetes-list-type",
            json!("map"),
        ),
        (
            sj,
            format!("{pod}.topologySpreadConstraints"),
            "x-kubernetes-list-map-keys",
            json!(["topologyKey", "whenUnsatisfiable"]),
        ),
        (
            sj,
            format!("{pod}.hostAliases"),
            "x-kubernetes-list-map-keys",
            json!(["ip"]),
        ),
        (
            sj,
            format!("{pod}.resources.claims"),
            "x-kubernetes-list-map-keys",
            json!(["name"]),
        ),
        (
            sj,
            ".spec.jobTargetRef.podFailurePolicy.rules[].onExitCodes.values".into(),
            "x-kubernetes-list-type",
            json!("set"),
        ),
        // Quantities have the quantity pattern; ports are int-or-string.
        (
            sj,
            format!("{pod}.containers[].resources.limits{{*}}"),
            "pattern",
            json!(QUANTITY),
        ),
        (
            sj,
            format!("{pod}.overhead{{*}}"),
            "anyOf",
            int_or_string.clone(),
        ),
        (
            sj,
            format!("{pod}.volumes[].emptyDir.sizeLimit"),
            "pattern",
            json!(QUANTITY),
        ),
        (
            sj,
            format!("{pod}.containers[].livenessProbe.httpGet.port"),
            "anyOf",
            int_or_string.clone(),
        ),
        (
            sj,
            format!("{pod}.containers[].livenessProbe.httpGet.port"),
            "pattern",
            Value::Null,
        ),
        // References whose name may be left out (defaulted to "").
        (
            sj,
            format!("{pod}.containers[].env[].valueFrom.secretKeyRef"),
            "required",
            json!(["key"]),
        ),
        (
            sj,
            format!("{pod}.containers[].env[].valueFrom.secretKeyRef.name"),
            "default",
            json!(""),
        ),
        (
            sj,
            format!("{pod}.initContainers[].envFrom[].configMapRef"),
            "required",
            Value::Null,
        ),
        (
            sj,
            format!("{pod}.imagePullSecrets[]"),
            "required",
            Value::Null,
        ),
        (
            sj,
            format!("{pod}.volumes[].configMap.name"),
            "default",
            json!(""),
        ),
        (
            sj,
            format!("{pod}.volumes[].projected.sources[].secret"),
            "required",
            Value::Null,
        ),
        // Other defaults the API server writes into the stored object.
        (
            sj,
            format!("{pod}.containers[].readinessProbe.grpc.service"),
            "default",
            json!(""),
        ),
        (
            sj,
            format!("{pod}.volumes[].azureDisk.fsType"),
            "default",
            json!("ext4"),
        ),
        (
            sj,
            format!("{pod}.volumes[].rbd.pool"),
            "default",
            json!("rbd"),
        ),
        (
            sj,
            format!("{pod}.volumes[].scaleIO.storageMode"),
            "default",
            json!("ThinProvisioned"),
        ),
        (
            sj,
            ".spec.jobTargetRef.podFailurePolicy.rules[].onPodConditions[]".into(),
            "required",
            json!(["type"]),
        ),
        // Embedded ObjectMeta keeps the fields a claim template may set.
        (
            sj,
            format!("{pod}.volumes[].ephemeral.volumeClaimTemplate.metadata"),
            "properties",
            json!(["annotations", "finalizers", "labels", "name", "namespace"]),
        ),
    ]
}

/// The value at a dotted schema path (`.a`, `[]`, `{*}` steps).
pub(super) fn at<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
    let mut node = schema;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("[]") {
            node = node.get("items")?;
            rest = r;
        } else if let Some(r) = rest.strip_prefix("{*}") {
            node = node.get("additionalProperties")?;
            rest = r;
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[', '{']).unwrap_or(r.len());
            node = node.get("properties")?.get(&r[..end])?;
            rest = &r[end..];
        } else {
            return None;
        }
    }
    Some(node)
}

pub(super) fn fact_at(schema: &Value, path: &str, key: &str) -> Option<Value> {
    let node = at(schema, path)?;
    match key {
        "required" | "properties" => {
            let mut names: Vec<String> = match node.get(key)? {
                Value::Array(items) => items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_string))
                    .collect(),
                Value::Object(map) => map.keys().cloned().collect(),
                _ => return None,
            };
            names.sort();
            (!names.is_empty()).then(|| json!(names))
        }
        _ => node.get(key).cloned(),
    }
}

#[test]
pub(super) fn embedded_kubernetes_types_carry_keda_s_constraints() {
    let mut wrong = Vec::new();
    for (plural, path, key, want) in embedded_facts() {
        let crd = ours(plural);
        let schema = schema(&crd);
        assert!(
            at(schema, &path).is_some(),
            "{plural}: no schema at `{path}`"
        );
        let got = fact_at(schema, &path, key).unwrap_or(Value::Null);
        if !same(Some(&got), Some(&want)) {
            wrong.push(format!(
                "{plural} `{path}` {key}: KEDA {want}, keda-rs {got}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
