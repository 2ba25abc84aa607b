//! Facts of KEDA's CRDs: `config/crd/bases/*.yaml` of kedacore/keda at 8b4f083 (main after
//! v2.20.1, the commit `docs/keda-compatibility.md` pins), with the JSON patches KEDA's
//! `config/crd/kustomization.yaml` applies (`patches/scaledobject_patch.yaml`,
//! `patches/scaledjob_patch.yaml`), i.e. the CRDs KEDA installs.
//!
//! Each [`Fact`] is one constraint the API server enforces or applies: `(path, key, JSON
//! value)`. The path walks `openAPIV3Schema`: `.field` a property, `[]` the items of an array,
//! `{*}` the values of a map. Keys: `type`, `format`, `default`, `enum`, `minItems`, `minimum`,
//! `minLength`, `pattern`, `required` (sorted), `properties` (the sorted field names, so a field
//! KEDA's schema has and ours lacks, or the reverse, is a difference), `anyOf` and the
//! `x-kubernetes-*` markers. Descriptions are not facts.
//!
//! The embedded Kubernetes types (`spec.jobTargetRef` of ScaledJob, the HPA `behavior` of
//! ScaledObject) are left out here: `keda_crd.rs` checks what matters in them by rule.
//!
//! `keda_crd.rs` checks these facts against our generated CRDs in every run, and, where KEDA's
//! repository is mirrored on the machine, against KEDA's files themselves, so this table cannot
//! drift from them unnoticed.

/// `(path, key, value as JSON)`.
pub type Fact = (&'static str, &'static str, &'static str);
/// `(name, type, jsonPath, priority)` of one `additionalPrinterColumns` entry.
pub type Column = (&'static str, &'static str, &'static str, i64);

/// A CRD's scope, names and subresources.
pub struct Names {
    pub scope: &'static str,
    pub kind: &'static str,
    pub list_kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// `subresources` of the served version, as JSON.
    pub subresources: &'static str,
}

/// `keda.sh_scaledobjects.yaml` (with `patches/scaledobject_patch.yaml`).
pub const SCALED_OBJECT: &[Fact] = &[
    (
        "",
        "properties",
        r#"["apiVersion","kind","metadata","spec","status"]"#,
    ),
    ("", "required", r#"["spec"]"#),
    ("", "type", r#""object""#),
    (".apiVersion", "type", r#""string""#),
    (".kind", "type", r#""string""#),
    (".metadata", "type", r#""object""#),
    (
        ".spec",
        "properties",
        r#"["advanced","cooldownPeriod","fallback","idleReplicaCount","initialCooldownPeriod","maxReplicaCount","minReplicaCount","pollingInterval","scaleTargetRef","triggers"]"#,
    ),
    (".spec", "required", r#"["scaleTargetRef","triggers"]"#),
    (".spec", "type", r#""object""#),
    (
        ".spec",
        "x-kubernetes-validations",
        r#"[{"message":"minReplicaCount must be less than or equal to maxReplicaCount","rule":"!has(self.minReplicaCount) || self.minReplicaCount <= (has(self.maxReplicaCount) ? self.maxReplicaCount : 100)"}]"#,
    ),
    (
        ".spec.advanced",
        "properties",
        r#"["horizontalPodAutoscalerConfig","restoreToOriginalReplicaCount","scalingModifiers"]"#,
    ),
    (".spec.advanced", "type", r#""object""#),
    (
        ".spec.advanced.horizontalPodAutoscalerConfig",
        "properties",
        r#"["behavior","name"]"#,
    ),
    (
        ".spec.advanced.horizontalPodAutoscalerConfig",
        "type",
        r#""object""#,
    ),
    (
        ".spec.advanced.horizontalPodAutoscalerConfig.name",
        "type",
        r#""string""#,
    ),
    (
        ".spec.advanced.restoreToOriginalReplicaCount",
        "type",
        r#""boolean""#,
    ),
    (
        ".spec.advanced.scalingModifiers",
        "properties",
        r#"["activationTarget","formula","metricType","target"]"#,
    ),
    (".spec.advanced.scalingModifiers", "type", r#""object""#),
    (
        ".spec.advanced.scalingModifiers.activationTarget",
        "type",
        r#""string""#,
    ),
    (
        ".spec.advanced.scalingModifiers.formula",
        "type",
        r#""string""#,
    ),
    (
        ".spec.advanced.scalingModifiers.metricType",
        "enum",
        r#"["AverageValue","Value"]"#,
    ),
    (
        ".spec.advanced.scalingModifiers.metricType",
        "type",
        r#""string""#,
    ),
    (
        ".spec.advanced.scalingModifiers.target",
        "type",
        r#""string""#,
    ),
    (".spec.cooldownPeriod", "format", r#""int32""#),
    (".spec.cooldownPeriod", "minimum", "0"),
    (".spec.cooldownPeriod", "type", r#""integer""#),
    (
        ".spec.fallback",
        "properties",
        r#"["behavior","failureThreshold","replicas"]"#,
    ),
    (
        ".spec.fallback",
        "required",
        r#"["failureThreshold","replicas"]"#,
    ),
    (".spec.fallback", "type", r#""object""#),
    (".spec.fallback.behavior", "default", r#""static""#),
    (
        ".spec.fallback.behavior",
        "enum",
        r#"["static","currentReplicas","currentReplicasIfHigher","currentReplicasIfLower","scalingModifiers"]"#,
    ),
    (".spec.fallback.behavior", "type", r#""string""#),
    (".spec.fallback.failureThreshold", "format", r#""int32""#),
    (".spec.fallback.failureThreshold", "minimum", "0"),
    (".spec.fallback.failureThreshold", "type", r#""integer""#),
    (".spec.fallback.replicas", "format", r#""int32""#),
    (".spec.fallback.replicas", "minimum", "0"),
    (".spec.fallback.replicas", "type", r#""integer""#),
    (".spec.idleReplicaCount", "format", r#""int32""#),
    (".spec.idleReplicaCount", "minimum", "0"),
    (".spec.idleReplicaCount", "type", r#""integer""#),
    (".spec.initialCooldownPeriod", "format", r#""int32""#),
    (".spec.initialCooldownPeriod", "minimum", "0"),
    (".spec.initialCooldownPeriod", "type", r#""integer""#),
    (".spec.maxReplicaCount", "format", r#""int32""#),
    (".spec.maxReplicaCount", "minimum", "1"),
    (".spec.maxReplicaCount", "type", r#""integer""#),
    (".spec.minReplicaCount", "format", r#""int32""#),
    (".spec.minReplicaCount", "minimum", "0"),
    (".spec.minReplicaCount", "type", r#""integer""#),
    (".spec.pollingInterval", "format", r#""int32""#),
    (".spec.pollingInterval", "minimum", "1"),
    (".spec.pollingInterval", "type", r#""integer""#),
    (
        ".spec.scaleTargetRef",
        "properties",
        r#"["apiVersion","envSourceContainerName","kind","name"]"#,
    ),
    (".spec.scaleTargetRef", "required", r#"["name"]"#),
    (".spec.scaleTargetRef", "type", r#""object""#),
    (".spec.scaleTargetRef.apiVersion", "type", r#""string""#),
    (
        ".spec.scaleTargetRef.envSourceContainerName",
        "type",
        r#""string""#,
    ),
    (".spec.scaleTargetRef.kind", "type", r#""string""#),
    (".spec.scaleTargetRef.name", "minLength", "1"),
    (".spec.scaleTargetRef.name", "type", r#""string""#),
    (".spec.triggers", "minItems", "1"),
    (".spec.triggers", "type", r#""array""#),
    (
        ".spec.triggers[]",
        "properties",
        r#"["authenticationRef","metadata","metricType","name","type","useCachedMetrics"]"#,
    ),
    (".spec.triggers[]", "required", r#"["metadata","type"]"#),
    (".spec.triggers[]", "type", r#""object""#),
    (
        ".spec.triggers[].authenticationRef",
        "properties",
        r#"["kind","name"]"#,
    ),
    (
        ".spec.triggers[].authenticationRef",
        "required",
        r#"["name"]"#,
    ),
    (".spec.triggers[].authenticationRef", "type", r#""object""#),
    (
        ".spec.triggers[].authenticationRef.kind",
        "enum",
        r#"["TriggerAuthentication","ClusterTriggerAuthentication"]"#,
    ),
    (
        ".spec.triggers[].authenticationRef.kind",
        "type",
        r#""string""#,
    ),
    (
        ".spec.triggers[].authenticationRef.name",
        "type",
        r#""string""#,
    ),
    (".spec.triggers[].metadata", "type", r#""object""#),
    (".spec.triggers[].metadata{*}", "type", r#""string""#),
    (".spec.triggers[].metricType", "type", r#""string""#),
    (".spec.triggers[].name", "type", r#""string""#),
    (".spec.triggers[].type", "minLength", "1"),
    (".spec.triggers[].type", "type", r#""string""#),
    (".spec.triggers[].useCachedMetrics", "type", r#""boolean""#),
    (
        ".status",
        "properties",
        r#"["authenticationsTypes","compositeScalerName","conditions","externalMetricNames","health","hpaName","lastActiveTime","originalReplicaCount","pausedReplicaCount","resourceMetricNames","scaleTargetGVKR","scaleTargetKind","triggersActivity","triggersTypes"]"#,
    ),
    (".status", "type", r#""object""#),
    (".status.authenticationsTypes", "type", r#""string""#),
    (".status.compositeScalerName", "type", r#""string""#),
    (".status.conditions", "type", r#""array""#),
    (
        ".status.conditions[]",
        "properties",
        r#"["message","reason","status","type"]"#,
    ),
    (".status.conditions[]", "required", r#"["status","type"]"#),
    (".status.conditions[]", "type", r#""object""#),
    (".status.conditions[].message", "type", r#""string""#),
    (".status.conditions[].reason", "type", r#""string""#),
    (".status.conditions[].status", "type", r#""string""#),
    (".status.conditions[].type", "type", r#""string""#),
    (".status.externalMetricNames", "type", r#""array""#),
    (".status.externalMetricNames[]", "type", r#""string""#),
    (".status.health", "type", r#""object""#),
    (
        ".status.health{*}",
        "properties",
        r#"["numberOfFailures","status"]"#,
    ),
    (".status.health{*}", "type", r#""object""#),
    (".status.health{*}.numberOfFailures", "format", r#""int32""#),
    (".status.health{*}.numberOfFailures", "type", r#""integer""#),
    (".status.health{*}.status", "type", r#""string""#),
    (".status.hpaName", "type", r#""string""#),
    (".status.lastActiveTime", "format", r#""date-time""#),
    (".status.lastActiveTime", "type", r#""string""#),
    (".status.originalReplicaCount", "format", r#""int32""#),
    (".status.originalReplicaCount", "type", r#""integer""#),
    (".status.pausedReplicaCount", "format", r#""int32""#),
    (".status.pausedReplicaCount", "type", r#""integer""#),
    (".status.resourceMetricNames", "type", r#""array""#),
    (".status.resourceMetricNames[]", "type", r#""string""#),
    (
        ".status.scaleTargetGVKR",
        "properties",
        r#"["group","kind","resource","version"]"#,
    ),
    (
        ".status.scaleTargetGVKR",
        "required",
        r#"["group","kind","resource","version"]"#,
    ),
    (".status.scaleTargetGVKR", "type", r#""object""#),
    (".status.scaleTargetGVKR.group", "type", r#""string""#),
    (".status.scaleTargetGVKR.kind", "type", r#""string""#),
    (".status.scaleTargetGVKR.resource", "type", r#""string""#),
    (".status.scaleTargetGVKR.version", "type", r#""string""#),
    (".status.scaleTargetKind", "type", r#""string""#),
    (".status.triggersActivity", "type", r#""object""#),
    (
        ".status.triggersActivity{*}",
        "properties",
        r#"["isActive"]"#,
    ),
    (".status.triggersActivity{*}", "type", r#""object""#),
    (
        ".status.triggersActivity{*}.isActive",
        "type",
        r#""boolean""#,
    ),
    (".status.triggersTypes", "type", r#""string""#),
];

/// `keda.sh_scaledjobs.yaml` (with `patches/scaledjob_patch.yaml`).
pub const SCALED_JOB: &[Fact] = &[
    (
        "",
        "properties",
        r#"["apiVersion","kind","metadata","spec","status"]"#,
    ),
    ("", "type", r#""object""#),
    (".apiVersion", "type", r#""string""#),
    (".kind", "type", r#""string""#),
    (".metadata", "type", r#""object""#),
    (
        ".spec",
        "properties",
        r#"["envSourceContainerName","failedJobsHistoryLimit","jobTargetRef","maxReplicaCount","minReplicaCount","pollingInterval","rollout","rolloutStrategy","scalingStrategy","successfulJobsHistoryLimit","triggers"]"#,
    ),
    (".spec", "required", r#"["jobTargetRef","triggers"]"#),
    (".spec", "type", r#""object""#),
    (".spec.envSourceContainerName", "type", r#""string""#),
    (".spec.failedJobsHistoryLimit", "format", r#""int32""#),
    (".spec.failedJobsHistoryLimit", "minimum", "0"),
    (".spec.failedJobsHistoryLimit", "type", r#""integer""#),
    (".spec.maxReplicaCount", "format", r#""int32""#),
    (".spec.maxReplicaCount", "minimum", "1"),
    (".spec.maxReplicaCount", "type", r#""integer""#),
    (".spec.minReplicaCount", "format", r#""int32""#),
    (".spec.minReplicaCount", "minimum", "0"),
    (".spec.minReplicaCount", "type", r#""integer""#),
    (".spec.pollingInterval", "format", r#""int32""#),
    (".spec.pollingInterval", "minimum", "1"),
    (".spec.pollingInterval", "type", r#""integer""#),
    (
        ".spec.rollout",
        "properties",
        r#"["propagationPolicy","strategy"]"#,
    ),
    (".spec.rollout", "type", r#""object""#),
    (
        ".spec.rollout.propagationPolicy",
        "enum",
        r#"["foreground","background"]"#,
    ),
    (".spec.rollout.propagationPolicy", "type", r#""string""#),
    (
        ".spec.rollout.strategy",
        "enum",
        r#"["gradual","immediate"]"#,
    ),
    (".spec.rollout.strategy", "type", r#""string""#),
    (
        ".spec.rolloutStrategy",
        "enum",
        r#"["gradual","immediate"]"#,
    ),
    (".spec.rolloutStrategy", "type", r#""string""#),
    (
        ".spec.scalingStrategy",
        "properties",
        r#"["customScalingQueueLengthDeduction","customScalingRunningJobPercentage","multipleScalersCalculation","pendingPodConditions","strategy"]"#,
    ),
    (".spec.scalingStrategy", "type", r#""object""#),
    (
        ".spec.scalingStrategy.customScalingQueueLengthDeduction",
        "format",
        r#""int32""#,
    ),
    (
        ".spec.scalingStrategy.customScalingQueueLengthDeduction",
        "type",
        r#""integer""#,
    ),
    (
        ".spec.scalingStrategy.customScalingRunningJobPercentage",
        "type",
        r#""string""#,
    ),
    (
        ".spec.scalingStrategy.multipleScalersCalculation",
        "enum",
        r#"["min","avg","sum","max"]"#,
    ),
    (
        ".spec.scalingStrategy.multipleScalersCalculation",
        "type",
        r#""string""#,
    ),
    (
        ".spec.scalingStrategy.pendingPodConditions",
        "type",
        r#""array""#,
    ),
    (
        ".spec.scalingStrategy.pendingPodConditions[]",
        "type",
        r#""string""#,
    ),
    (
        ".spec.scalingStrategy.strategy",
        "enum",
        r#"["default","custom","accurate","eager"]"#,
    ),
    (".spec.scalingStrategy.strategy", "type", r#""string""#),
    (".spec.successfulJobsHistoryLimit", "format", r#""int32""#),
    (".spec.successfulJobsHistoryLimit", "minimum", "0"),
    (".spec.successfulJobsHistoryLimit", "type", r#""integer""#),
    (".spec.triggers", "minItems", "1"),
    (".spec.triggers", "type", r#""array""#),
    (
        ".spec.triggers[]",
        "properties",
        r#"["authenticationRef","metadata","name","type","useCachedMetrics"]"#,
    ),
    (".spec.triggers[]", "required", r#"["metadata","type"]"#),
    (".spec.triggers[]", "type", r#""object""#),
    (
        ".spec.triggers[].authenticationRef",
        "properties",
        r#"["kind","name"]"#,
    ),
    (
        ".spec.triggers[].authenticationRef",
        "required",
        r#"["name"]"#,
    ),
    (".spec.triggers[].authenticationRef", "type", r#""object""#),
    (
        ".spec.triggers[].authenticationRef.kind",
        "enum",
        r#"["TriggerAuthentication","ClusterTriggerAuthentication"]"#,
    ),
    (
        ".spec.triggers[].authenticationRef.kind",
        "type",
        r#""string""#,
    ),
    (
        ".spec.triggers[].authenticationRef.name",
        "type",
        r#""string""#,
    ),
    (".spec.triggers[].metadata", "type", r#""object""#),
    (".spec.triggers[].metadata{*}", "type", r#""string""#),
    (".spec.triggers[].name", "type", r#""string""#),
    (".spec.triggers[].type", "minLength", "1"),
    (".spec.triggers[].type", "type", r#""string""#),
    (".spec.triggers[].useCachedMetrics", "type", r#""boolean""#),
    (
        ".status",
        "properties",
        r#"["Paused","authenticationsTypes","conditions","externalMetricNames","lastActiveTime","triggersActivity","triggersTypes"]"#,
    ),
    (".status", "type", r#""object""#),
    (".status.Paused", "type", r#""string""#),
    (".status.authenticationsTypes", "type", r#""string""#),
    (".status.conditions", "type", r#""array""#),
    (
        ".status.conditions[]",
        "properties",
        r#"["message","reason","status","type"]"#,
    ),
    (".status.conditions[]", "required", r#"["status","type"]"#),
    (".status.conditions[]", "type", r#""object""#),
    (".status.conditions[].message", "type", r#""string""#),
    (".status.conditions[].reason", "type", r#""string""#),
    (".status.conditions[].status", "type", r#""string""#),
    (".status.conditions[].type", "type", r#""string""#),
    (".status.externalMetricNames", "type", r#""array""#),
    (".status.externalMetricNames[]", "type", r#""string""#),
    (".status.lastActiveTime", "format", r#""date-time""#),
    (".status.lastActiveTime", "type", r#""string""#),
    (".status.triggersActivity", "type", r#""object""#),
    (
        ".status.triggersActivity{*}",
        "properties",
        r#"["isActive"]"#,
    ),
    (".status.triggersActivity{*}", "type", r#""object""#),
    (
        ".status.triggersActivity{*}.isActive",
        "type",
        r#""boolean""#,
    ),
    (".status.triggersTypes", "type", r#""string""#),
];

/// `keda.sh_triggerauthentications.yaml` and `keda.sh_clustertriggerauthentications.yaml`
/// (the same schema).
pub const TRIGGER_AUTHENTICATION: &[Fact] = &[
    (
        "",
        "properties",
        r#"["apiVersion","kind","metadata","spec","status"]"#,
    ),
    ("", "required", r#"["spec"]"#),
    ("", "type", r#""object""#),
    (".apiVersion", "type", r#""string""#),
    (".kind", "type", r#""string""#),
    (".metadata", "type", r#""object""#),
    (
        ".spec",
        "properties",
        r#"["awsSecretManager","azureKeyVault","boundServiceAccountToken","configMapTargetRef","env","filePath","gcpSecretManager","hashiCorpVault","oauth2","podIdentity","secretTargetRef"]"#,
    ),
    (".spec", "type", r#""object""#),
    (
        ".spec.awsSecretManager",
        "properties",
        r#"["credentials","podIdentity","region","secrets"]"#,
    ),
    (".spec.awsSecretManager", "required", r#"["secrets"]"#),
    (".spec.awsSecretManager", "type", r#""object""#),
    (
        ".spec.awsSecretManager.credentials",
        "properties",
        r#"["accessKey","accessSecretKey","accessToken"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials",
        "required",
        r#"["accessKey","accessSecretKey"]"#,
    ),
    (".spec.awsSecretManager.credentials", "type", r#""object""#),
    (
        ".spec.awsSecretManager.credentials.accessKey",
        "properties",
        r#"["valueFrom"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessKey",
        "required",
        r#"["valueFrom"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessKey",
        "type",
        r#""object""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessKey.valueFrom",
        "properties",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessKey.valueFrom",
        "required",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessKey.valueFrom",
        "type",
        r#""object""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessKey.valueFrom.secretKeyRef",
        "properties",
        r#"["key","name"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessKey.valueFrom.secretKeyRef",
        "required",
        r#"["key","name"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessKey.valueFrom.secretKeyRef",
        "type",
        r#""object""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessKey.valueFrom.secretKeyRef.key",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessKey.valueFrom.secretKeyRef.name",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey",
        "properties",
        r#"["valueFrom"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey",
        "required",
        r#"["valueFrom"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey",
        "type",
        r#""object""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey.valueFrom",
        "properties",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey.valueFrom",
        "required",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey.valueFrom",
        "type",
        r#""object""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey.valueFrom.secretKeyRef",
        "properties",
        r#"["key","name"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey.valueFrom.secretKeyRef",
        "required",
        r#"["key","name"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey.valueFrom.secretKeyRef",
        "type",
        r#""object""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey.valueFrom.secretKeyRef.key",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessSecretKey.valueFrom.secretKeyRef.name",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken",
        "properties",
        r#"["valueFrom"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken",
        "required",
        r#"["valueFrom"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken",
        "type",
        r#""object""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken.valueFrom",
        "properties",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken.valueFrom",
        "required",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken.valueFrom",
        "type",
        r#""object""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken.valueFrom.secretKeyRef",
        "properties",
        r#"["key","name"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken.valueFrom.secretKeyRef",
        "required",
        r#"["key","name"]"#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken.valueFrom.secretKeyRef",
        "type",
        r#""object""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken.valueFrom.secretKeyRef.key",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.credentials.accessToken.valueFrom.secretKeyRef.name",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.podIdentity",
        "properties",
        r#"["externalID","identityAuthorityHost","identityId","identityOwner","identityTenantId","provider","roleArn"]"#,
    ),
    (
        ".spec.awsSecretManager.podIdentity",
        "required",
        r#"["provider"]"#,
    ),
    (".spec.awsSecretManager.podIdentity", "type", r#""object""#),
    (
        ".spec.awsSecretManager.podIdentity.externalID",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.podIdentity.identityAuthorityHost",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.podIdentity.identityId",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.podIdentity.identityOwner",
        "enum",
        r#"["keda","workload"]"#,
    ),
    (
        ".spec.awsSecretManager.podIdentity.identityOwner",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.podIdentity.identityTenantId",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.podIdentity.provider",
        "enum",
        r#"["azure-workload","gcp","aws","aws-eks","none"]"#,
    ),
    (
        ".spec.awsSecretManager.podIdentity.provider",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.podIdentity.roleArn",
        "type",
        r#""string""#,
    ),
    (".spec.awsSecretManager.region", "type", r#""string""#),
    (".spec.awsSecretManager.secrets", "minItems", "1"),
    (".spec.awsSecretManager.secrets", "type", r#""array""#),
    (
        ".spec.awsSecretManager.secrets[]",
        "properties",
        r#"["name","parameter","secretKey","versionId","versionStage"]"#,
    ),
    (
        ".spec.awsSecretManager.secrets[]",
        "required",
        r#"["name","parameter"]"#,
    ),
    (".spec.awsSecretManager.secrets[]", "type", r#""object""#),
    (
        ".spec.awsSecretManager.secrets[].name",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.secrets[].parameter",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.secrets[].secretKey",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.secrets[].versionId",
        "type",
        r#""string""#,
    ),
    (
        ".spec.awsSecretManager.secrets[].versionStage",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault",
        "properties",
        r#"["cloud","credentials","podIdentity","secrets","vaultUri"]"#,
    ),
    (
        ".spec.azureKeyVault",
        "required",
        r#"["secrets","vaultUri"]"#,
    ),
    (".spec.azureKeyVault", "type", r#""object""#),
    (
        ".spec.azureKeyVault.cloud",
        "properties",
        r#"["activeDirectoryEndpoint","keyVaultResourceURL","type"]"#,
    ),
    (".spec.azureKeyVault.cloud", "required", r#"["type"]"#),
    (".spec.azureKeyVault.cloud", "type", r#""object""#),
    (
        ".spec.azureKeyVault.cloud.activeDirectoryEndpoint",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.cloud.keyVaultResourceURL",
        "type",
        r#""string""#,
    ),
    (".spec.azureKeyVault.cloud.type", "type", r#""string""#),
    (
        ".spec.azureKeyVault.credentials",
        "properties",
        r#"["clientId","clientSecret","tenantId"]"#,
    ),
    (
        ".spec.azureKeyVault.credentials",
        "required",
        r#"["clientId","clientSecret","tenantId"]"#,
    ),
    (".spec.azureKeyVault.credentials", "type", r#""object""#),
    (
        ".spec.azureKeyVault.credentials.clientId",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret",
        "properties",
        r#"["valueFrom"]"#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret",
        "required",
        r#"["valueFrom"]"#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret",
        "type",
        r#""object""#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret.valueFrom",
        "properties",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret.valueFrom",
        "required",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret.valueFrom",
        "type",
        r#""object""#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret.valueFrom.secretKeyRef",
        "properties",
        r#"["key","name"]"#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret.valueFrom.secretKeyRef",
        "required",
        r#"["key","name"]"#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret.valueFrom.secretKeyRef",
        "type",
        r#""object""#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret.valueFrom.secretKeyRef.key",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.credentials.clientSecret.valueFrom.secretKeyRef.name",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.credentials.tenantId",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.podIdentity",
        "properties",
        r#"["externalID","identityAuthorityHost","identityId","identityOwner","identityTenantId","provider","roleArn"]"#,
    ),
    (
        ".spec.azureKeyVault.podIdentity",
        "required",
        r#"["provider"]"#,
    ),
    (".spec.azureKeyVault.podIdentity", "type", r#""object""#),
    (
        ".spec.azureKeyVault.podIdentity.externalID",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.podIdentity.identityAuthorityHost",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.podIdentity.identityId",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.podIdentity.identityOwner",
        "enum",
        r#"["keda","workload"]"#,
    ),
    (
        ".spec.azureKeyVault.podIdentity.identityOwner",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.podIdentity.identityTenantId",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.podIdentity.provider",
        "enum",
        r#"["azure-workload","gcp","aws","aws-eks","none"]"#,
    ),
    (
        ".spec.azureKeyVault.podIdentity.provider",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.podIdentity.roleArn",
        "type",
        r#""string""#,
    ),
    (".spec.azureKeyVault.secrets", "minItems", "1"),
    (".spec.azureKeyVault.secrets", "type", r#""array""#),
    (
        ".spec.azureKeyVault.secrets[]",
        "properties",
        r#"["name","parameter","version"]"#,
    ),
    (
        ".spec.azureKeyVault.secrets[]",
        "required",
        r#"["name","parameter"]"#,
    ),
    (".spec.azureKeyVault.secrets[]", "type", r#""object""#),
    (".spec.azureKeyVault.secrets[].name", "type", r#""string""#),
    (
        ".spec.azureKeyVault.secrets[].parameter",
        "type",
        r#""string""#,
    ),
    (
        ".spec.azureKeyVault.secrets[].version",
        "type",
        r#""string""#,
    ),
    (".spec.azureKeyVault.vaultUri", "type", r#""string""#),
    (".spec.boundServiceAccountToken", "type", r#""array""#),
    (
        ".spec.boundServiceAccountToken[]",
        "properties",
        r#"["parameter","serviceAccountName"]"#,
    ),
    (
        ".spec.boundServiceAccountToken[]",
        "required",
        r#"["parameter","serviceAccountName"]"#,
    ),
    (".spec.boundServiceAccountToken[]", "type", r#""object""#),
    (
        ".spec.boundServiceAccountToken[].parameter",
        "type",
        r#""string""#,
    ),
    (
        ".spec.boundServiceAccountToken[].serviceAccountName",
        "type",
        r#""string""#,
    ),
    (".spec.configMapTargetRef", "type", r#""array""#),
    (
        ".spec.configMapTargetRef[]",
        "properties",
        r#"["key","name","parameter"]"#,
    ),
    (
        ".spec.configMapTargetRef[]",
        "required",
        r#"["key","name","parameter"]"#,
    ),
    (".spec.configMapTargetRef[]", "type", r#""object""#),
    (".spec.configMapTargetRef[].key", "type", r#""string""#),
    (".spec.configMapTargetRef[].name", "type", r#""string""#),
    (
        ".spec.configMapTargetRef[].parameter",
        "type",
        r#""string""#,
    ),
    (".spec.env", "type", r#""array""#),
    (
        ".spec.env[]",
        "properties",
        r#"["containerName","name","parameter"]"#,
    ),
    (".spec.env[]", "required", r#"["name","parameter"]"#),
    (".spec.env[]", "type", r#""object""#),
    (".spec.env[].containerName", "type", r#""string""#),
    (".spec.env[].name", "type", r#""string""#),
    (".spec.env[].parameter", "type", r#""string""#),
    (".spec.filePath", "type", r#""string""#),
    (
        ".spec.gcpSecretManager",
        "properties",
        r#"["credentials","podIdentity","secrets"]"#,
    ),
    (".spec.gcpSecretManager", "required", r#"["secrets"]"#),
    (".spec.gcpSecretManager", "type", r#""object""#),
    (
        ".spec.gcpSecretManager.credentials",
        "properties",
        r#"["clientSecret"]"#,
    ),
    (
        ".spec.gcpSecretManager.credentials",
        "required",
        r#"["clientSecret"]"#,
    ),
    (".spec.gcpSecretManager.credentials", "type", r#""object""#),
    (
        ".spec.gcpSecretManager.credentials.clientSecret",
        "properties",
        r#"["valueFrom"]"#,
    ),
    (
        ".spec.gcpSecretManager.credentials.clientSecret",
        "required",
        r#"["valueFrom"]"#,
    ),
    (
        ".spec.gcpSecretManager.credentials.clientSecret",
        "type",
        r#""object""#,
    ),
    (
        ".spec.gcpSecretManager.credentials.clientSecret.valueFrom",
        "properties",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.gcpSecretManager.credentials.clientSecret.valueFrom",
        "required",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.gcpSecretManager.credentials.clientSecret.valueFrom",
        "type",
        r#""object""#,
    ),
    (
        ".spec.gcpSecretManager.credentials.clientSecret.valueFrom.secretKeyRef",
        "properties",
        r#"["key","name"]"#,
    ),
    (
        ".spec.gcpSecretManager.credentials.clientSecret.valueFrom.secretKeyRef",
        "required",
        r#"["key","name"]"#,
    ),
    (
        ".spec.gcpSecretManager.credentials.clientSecret.valueFrom.secretKeyRef",
        "type",
        r#""object""#,
    ),
    (
        ".spec.gcpSecretManager.credentials.clientSecret.valueFrom.secretKeyRef.key",
        "type",
        r#""string""#,
    ),
    (
        ".spec.gcpSecretManager.credentials.clientSecret.valueFrom.secretKeyRef.name",
        "type",
        r#""string""#,
    ),
    (
        ".spec.gcpSecretManager.podIdentity",
        "properties",
        r#"["externalID","identityAuthorityHost","identityId","identityOwner","identityTenantId","provider","roleArn"]"#,
    ),
    (
        ".spec.gcpSecretManager.podIdentity",
        "required",
        r#"["provider"]"#,
    ),
    (".spec.gcpSecretManager.podIdentity", "type", r#""object""#),
    (
        ".spec.gcpSecretManager.podIdentity.externalID",
        "type",
        r#""string""#,
    ),
    (
        ".spec.gcpSecretManager.podIdentity.identityAuthorityHost",
        "type",
        r#""string""#,
    ),
    (
        ".spec.gcpSecretManager.podIdentity.identityId",
        "type",
        r#""string""#,
    ),
    (
        ".spec.gcpSecretManager.podIdentity.identityOwner",
        "enum",
        r#"["keda","workload"]"#,
    ),
    (
        ".spec.gcpSecretManager.podIdentity.identityOwner",
        "type",
        r#""string""#,
    ),
    (
        ".spec.gcpSecretManager.podIdentity.identityTenantId",
        "type",
        r#""string""#,
    ),
    (
        ".spec.gcpSecretManager.podIdentity.provider",
        "enum",
        r#"["azure-workload","gcp","aws","aws-eks","none"]"#,
    ),
    (
        ".spec.gcpSecretManager.podIdentity.provider",
        "type",
        r#""string""#,
    ),
    (
        ".spec.gcpSecretManager.podIdentity.roleArn",
        "type",
        r#""string""#,
    ),
    (".spec.gcpSecretManager.secrets", "minItems", "1"),
    (".spec.gcpSecretManager.secrets", "type", r#""array""#),
    (
        ".spec.gcpSecretManager.secrets[]",
        "properties",
        r#"["id","parameter","version"]"#,
    ),
    (
        ".spec.gcpSecretManager.secrets[]",
        "required",
        r#"["id","parameter"]"#,
    ),
    (".spec.gcpSecretManager.secrets[]", "type", r#""object""#),
    (".spec.gcpSecretManager.secrets[].id", "type", r#""string""#),
    (
        ".spec.gcpSecretManager.secrets[].parameter",
        "type",
        r#""string""#,
    ),
    (
        ".spec.gcpSecretManager.secrets[].version",
        "type",
        r#""string""#,
    ),
    (
        ".spec.hashiCorpVault",
        "properties",
        r#"["address","authentication","credential","mount","namespace","role","secrets"]"#,
    ),
    (
        ".spec.hashiCorpVault",
        "required",
        r#"["address","authentication","secrets"]"#,
    ),
    (".spec.hashiCorpVault", "type", r#""object""#),
    (".spec.hashiCorpVault.address", "type", r#""string""#),
    (
        ".spec.hashiCorpVault.authentication",
        "enum",
        r#"["token","kubernetes"]"#,
    ),
    (".spec.hashiCorpVault.authentication", "type", r#""string""#),
    (
        ".spec.hashiCorpVault.credential",
        "properties",
        r#"["serviceAccount","serviceAccountName","token"]"#,
    ),
    (".spec.hashiCorpVault.credential", "type", r#""object""#),
    (
        ".spec.hashiCorpVault.credential.serviceAccount",
        "type",
        r#""string""#,
    ),
    (
        ".spec.hashiCorpVault.credential.serviceAccountName",
        "type",
        r#""string""#,
    ),
    (
        ".spec.hashiCorpVault.credential.token",
        "type",
        r#""string""#,
    ),
    (".spec.hashiCorpVault.mount", "type", r#""string""#),
    (".spec.hashiCorpVault.namespace", "type", r#""string""#),
    (".spec.hashiCorpVault.role", "type", r#""string""#),
    (".spec.hashiCorpVault.secrets", "minItems", "1"),
    (".spec.hashiCorpVault.secrets", "type", r#""array""#),
    (
        ".spec.hashiCorpVault.secrets[]",
        "properties",
        r#"["key","parameter","path","pkiData","type"]"#,
    ),
    (
        ".spec.hashiCorpVault.secrets[]",
        "required",
        r#"["key","parameter","path"]"#,
    ),
    (".spec.hashiCorpVault.secrets[]", "type", r#""object""#),
    (".spec.hashiCorpVault.secrets[].key", "type", r#""string""#),
    (
        ".spec.hashiCorpVault.secrets[].parameter",
        "type",
        r#""string""#,
    ),
    (".spec.hashiCorpVault.secrets[].path", "type", r#""string""#),
    (
        ".spec.hashiCorpVault.secrets[].pkiData",
        "properties",
        r#"["altNames","commonName","format","ipSans","otherSans","ttl","uriSans"]"#,
    ),
    (
        ".spec.hashiCorpVault.secrets[].pkiData",
        "type",
        r#""object""#,
    ),
    (
        ".spec.hashiCorpVault.secrets[].pkiData.altNames",
        "type",
        r#""string""#,
    ),
    (
        ".spec.hashiCorpVault.secrets[].pkiData.commonName",
        "type",
        r#""string""#,
    ),
    (
        ".spec.hashiCorpVault.secrets[].pkiData.format",
        "type",
        r#""string""#,
    ),
    (
        ".spec.hashiCorpVault.secrets[].pkiData.ipSans",
        "type",
        r#""string""#,
    ),
    (
        ".spec.hashiCorpVault.secrets[].pkiData.otherSans",
        "type",
        r#""string""#,
    ),
    (
        ".spec.hashiCorpVault.secrets[].pkiData.ttl",
        "type",
        r#""string""#,
    ),
    (
        ".spec.hashiCorpVault.secrets[].pkiData.uriSans",
        "type",
        r#""string""#,
    ),
    (
        ".spec.hashiCorpVault.secrets[].type",
        "enum",
        r#"["","secretV2","secret","pki"]"#,
    ),
    (".spec.hashiCorpVault.secrets[].type", "type", r#""string""#),
    (
        ".spec.oauth2",
        "properties",
        r#"["clientId","clientSecret","scopes","tokenUrl","tokenUrlParams","type"]"#,
    ),
    (
        ".spec.oauth2",
        "required",
        r#"["clientId","tokenUrl","type"]"#,
    ),
    (".spec.oauth2", "type", r#""object""#),
    (".spec.oauth2.clientId", "type", r#""string""#),
    (
        ".spec.oauth2.clientSecret",
        "properties",
        r#"["valueFrom"]"#,
    ),
    (".spec.oauth2.clientSecret", "required", r#"["valueFrom"]"#),
    (".spec.oauth2.clientSecret", "type", r#""object""#),
    (
        ".spec.oauth2.clientSecret.valueFrom",
        "properties",
        r#"["secretKeyRef"]"#,
    ),
    (
        ".spec.oauth2.clientSecret.valueFrom",
        "required",
        r#"["secretKeyRef"]"#,
    ),
    (".spec.oauth2.clientSecret.valueFrom", "type", r#""object""#),
    (
        ".spec.oauth2.clientSecret.valueFrom.secretKeyRef",
        "properties",
        r#"["key","name"]"#,
    ),
    (
        ".spec.oauth2.clientSecret.valueFrom.secretKeyRef",
        "required",
        r#"["key","name"]"#,
    ),
    (
        ".spec.oauth2.clientSecret.valueFrom.secretKeyRef",
        "type",
        r#""object""#,
    ),
    (
        ".spec.oauth2.clientSecret.valueFrom.secretKeyRef.key",
        "type",
        r#""string""#,
    ),
    (
        ".spec.oauth2.clientSecret.valueFrom.secretKeyRef.name",
        "type",
        r#""string""#,
    ),
    (".spec.oauth2.scopes", "type", r#""array""#),
    (".spec.oauth2.scopes[]", "type", r#""string""#),
    (".spec.oauth2.tokenUrl", "type", r#""string""#),
    (".spec.oauth2.tokenUrlParams", "type", r#""object""#),
    (".spec.oauth2.tokenUrlParams{*}", "type", r#""string""#),
    (".spec.oauth2.type", "default", r#""clientCredentials""#),
    (".spec.oauth2.type", "enum", r#"["clientCredentials"]"#),
    (".spec.oauth2.type", "type", r#""string""#),
    (
        ".spec.podIdentity",
        "properties",
        r#"["externalID","identityAuthorityHost","identityId","identityOwner","identityTenantId","provider","roleArn"]"#,
    ),
    (".spec.podIdentity", "required", r#"["provider"]"#),
    (".spec.podIdentity", "type", r#""object""#),
    (".spec.podIdentity.externalID", "type", r#""string""#),
    (
        ".spec.podIdentity.identityAuthorityHost",
        "type",
        r#""string""#,
    ),
    (".spec.podIdentity.identityId", "type", r#""string""#),
    (
        ".spec.podIdentity.identityOwner",
        "enum",
        r#"["keda","workload"]"#,
    ),
    (".spec.podIdentity.identityOwner", "type", r#""string""#),
    (".spec.podIdentity.identityTenantId", "type", r#""string""#),
    (
        ".spec.podIdentity.provider",
        "enum",
        r#"["azure-workload","gcp","aws","aws-eks","none"]"#,
    ),
    (".spec.podIdentity.provider", "type", r#""string""#),
    (".spec.podIdentity.roleArn", "type", r#""string""#),
    (".spec.secretTargetRef", "type", r#""array""#),
    (
        ".spec.secretTargetRef[]",
        "properties",
        r#"["key","name","parameter"]"#,
    ),
    (
        ".spec.secretTargetRef[]",
        "required",
        r#"["key","name","parameter"]"#,
    ),
    (".spec.secretTargetRef[]", "type", r#""object""#),
    (".spec.secretTargetRef[].key", "type", r#""string""#),
    (".spec.secretTargetRef[].name", "type", r#""string""#),
    (".spec.secretTargetRef[].parameter", "type", r#""string""#),
    (".status", "properties", r#"["scaledjobs","scaledobjects"]"#),
    (".status", "type", r#""object""#),
    (".status.scaledjobs", "type", r#""string""#),
    (".status.scaledobjects", "type", r#""string""#),
];

/// `eventing.keda.sh_cloudeventsources.yaml` and `eventing.keda.sh_clustercloudeventsources.yaml`
/// (the same schema).
pub const CLOUD_EVENT_SOURCE: &[Fact] = &[
    (
        "",
        "properties",
        r#"["apiVersion","kind","metadata","spec","status"]"#,
    ),
    ("", "required", r#"["spec"]"#),
    ("", "type", r#""object""#),
    (".apiVersion", "type", r#""string""#),
    (".kind", "type", r#""string""#),
    (".metadata", "type", r#""object""#),
    (
        ".spec",
        "properties",
        r#"["authenticationRef","clusterName","destination","eventSubscription"]"#,
    ),
    (".spec", "required", r#"["destination"]"#),
    (".spec", "type", r#""object""#),
    (
        ".spec.authenticationRef",
        "properties",
        r#"["kind","name"]"#,
    ),
    (".spec.authenticationRef", "required", r#"["name"]"#),
    (".spec.authenticationRef", "type", r#""object""#),
    (
        ".spec.authenticationRef.kind",
        "enum",
        r#"["TriggerAuthentication","ClusterTriggerAuthentication"]"#,
    ),
    (".spec.authenticationRef.kind", "type", r#""string""#),
    (".spec.authenticationRef.name", "type", r#""string""#),
    (".spec.clusterName", "type", r#""string""#),
    (
        ".spec.destination",
        "properties",
        r#"["azureEventGridTopic","http"]"#,
    ),
    (".spec.destination", "type", r#""object""#),
    (
        ".spec.destination.azureEventGridTopic",
        "properties",
        r#"["endpoint"]"#,
    ),
    (
        ".spec.destination.azureEventGridTopic",
        "required",
        r#"["endpoint"]"#,
    ),
    (
        ".spec.destination.azureEventGridTopic",
        "type",
        r#""object""#,
    ),
    (
        ".spec.destination.azureEventGridTopic.endpoint",
        "type",
        r#""string""#,
    ),
    (".spec.destination.http", "properties", r#"["uri"]"#),
    (".spec.destination.http", "required", r#"["uri"]"#),
    (".spec.destination.http", "type", r#""object""#),
    (".spec.destination.http.uri", "type", r#""string""#),
    (
        ".spec.eventSubscription",
        "properties",
        r#"["excludedEventTypes","includedEventTypes"]"#,
    ),
    (".spec.eventSubscription", "type", r#""object""#),
    (
        ".spec.eventSubscription.excludedEventTypes",
        "type",
        r#""array""#,
    ),
    (
        ".spec.eventSubscription.excludedEventTypes[]",
        "enum",
        r#"["keda.scaledobject.ready.v1","keda.scaledobject.failed.v1","keda.scaledobject.removed.v1","keda.scaledobject.paused.v1","keda.scaledobject.unpaused.v1","keda.scaledjob.ready.v1","keda.scaledjob.failed.v1","keda.scaledjob.removed.v1","keda.scaledjob.paused.v1","keda.scaledjob.unpaused.v1","keda.scaledjob.rolloutcleanup.started.v1","keda.scaledjob.rolloutcleanup.completed.v1","keda.scaledjob.rolloutcleanup.failed.v1","keda.authentication.triggerauthentication.created.v1","keda.authentication.triggerauthentication.updated.v1","keda.authentication.triggerauthentication.removed.v1","keda.authentication.clustertriggerauthentication.created.v1","keda.authentication.clustertriggerauthentication.updated.v1","keda.authentication.clustertriggerauthentication.removed.v1"]"#,
    ),
    (
        ".spec.eventSubscription.excludedEventTypes[]",
        "type",
        r#""string""#,
    ),
    (
        ".spec.eventSubscription.includedEventTypes",
        "type",
        r#""array""#,
    ),
    (
        ".spec.eventSubscription.includedEventTypes[]",
        "enum",
        r#"["keda.scaledobject.ready.v1","keda.scaledobject.failed.v1","keda.scaledobject.removed.v1","keda.scaledobject.paused.v1","keda.scaledobject.unpaused.v1","keda.scaledjob.ready.v1","keda.scaledjob.failed.v1","keda.scaledjob.removed.v1","keda.scaledjob.paused.v1","keda.scaledjob.unpaused.v1","keda.scaledjob.rolloutcleanup.started.v1","keda.scaledjob.rolloutcleanup.completed.v1","keda.scaledjob.rolloutcleanup.failed.v1","keda.authentication.triggerauthentication.created.v1","keda.authentication.triggerauthentication.updated.v1","keda.authentication.triggerauthentication.removed.v1","keda.authentication.clustertriggerauthentication.created.v1","keda.authentication.clustertriggerauthentication.updated.v1","keda.authentication.clustertriggerauthentication.removed.v1"]"#,
    ),
    (
        ".spec.eventSubscription.includedEventTypes[]",
        "type",
        r#""string""#,
    ),
    (".status", "properties", r#"["conditions"]"#),
    (".status", "type", r#""object""#),
    (".status.conditions", "type", r#""array""#),
    (
        ".status.conditions[]",
        "properties",
        r#"["message","reason","status","type"]"#,
    ),
    (".status.conditions[]", "required", r#"["status","type"]"#),
    (".status.conditions[]", "type", r#""object""#),
    (".status.conditions[].message", "type", r#""string""#),
    (".status.conditions[].reason", "type", r#""string""#),
    (".status.conditions[].status", "type", r#""string""#),
    (".status.conditions[].type", "type", r#""string""#),
];

/// `keda.sh_scaledobjects.yaml`: `additionalPrinterColumns` in order: name, type, JSONPath, priority.
pub const SCALED_OBJECT_COLUMNS: &[Column] = &[
    ("ScaleTargetKind", "string", ".status.scaleTargetKind", 0),
    ("ScaleTargetName", "string", ".spec.scaleTargetRef.name", 0),
    ("Min", "integer", ".spec.minReplicaCount", 0),
    ("Max", "integer", ".spec.maxReplicaCount", 0),
    (
        "Ready",
        "string",
        r#".status.conditions[?(@.type=="Ready")].status"#,
        0,
    ),
    (
        "Active",
        "string",
        r#".status.conditions[?(@.type=="Active")].status"#,
        0,
    ),
    (
        "Fallback",
        "string",
        r#".status.conditions[?(@.type=="Fallback")].status"#,
        0,
    ),
    (
        "Paused",
        "string",
        r#".status.conditions[?(@.type=="Paused")].status"#,
        0,
    ),
    ("Triggers", "string", ".status.triggersTypes", 0),
    (
        "Authentications",
        "string",
        ".status.authenticationsTypes",
        0,
    ),
    ("Age", "date", ".metadata.creationTimestamp", 0),
];

/// `keda.sh_scaledobjects.yaml`: scope, names, subresources.
pub const SCALED_OBJECT_NAMES: Names = Names {
    scope: "Namespaced",
    kind: "ScaledObject",
    list_kind: "ScaledObjectList",
    plural: "scaledobjects",
    singular: "scaledobject",
    short_names: &["so"],
    categories: &[],
    subresources: r#"{"status":{}}"#,
};

/// `keda.sh_scaledjobs.yaml`: `additionalPrinterColumns` in order: name, type, JSONPath, priority.
pub const SCALED_JOB_COLUMNS: &[Column] = &[
    ("Min", "integer", ".spec.minReplicaCount", 0),
    ("Max", "integer", ".spec.maxReplicaCount", 0),
    (
        "Ready",
        "string",
        r#".status.conditions[?(@.type=="Ready")].status"#,
        0,
    ),
    (
        "Active",
        "string",
        r#".status.conditions[?(@.type=="Active")].status"#,
        0,
    ),
    (
        "Paused",
        "string",
        r#".status.conditions[?(@.type=="Paused")].status"#,
        0,
    ),
    ("Triggers", "string", ".status.triggersTypes", 0),
    (
        "Authentications",
        "string",
        ".status.authenticationsTypes",
        0,
    ),
    ("Age", "date", ".metadata.creationTimestamp", 0),
];

/// `keda.sh_scaledjobs.yaml`: scope, names, subresources.
pub const SCALED_JOB_NAMES: Names = Names {
    scope: "Namespaced",
    kind: "ScaledJob",
    list_kind: "ScaledJobList",
    plural: "scaledjobs",
    singular: "scaledjob",
    short_names: &["sj"],
    categories: &[],
    subresources: r#"{"status":{}}"#,
};

/// `keda.sh_triggerauthentications.yaml`: `additionalPrinterColumns` in order: name, type, JSONPath, priority.
pub const TRIGGER_AUTHENTICATION_COLUMNS: &[Column] = &[
    ("PodIdentity", "string", ".spec.podIdentity.provider", 0),
    ("Secret", "string", ".spec.secretTargetRef[*].name", 0),
    ("Env", "string", ".spec.env[*].name", 0),
    ("VaultAddress", "string", ".spec.hashiCorpVault.address", 0),
    ("ScaledObjects", "string", ".status.scaledobjects", 1),
    ("ScaledJobs", "string", ".status.scaledjobs", 1),
];

/// `keda.sh_triggerauthentications.yaml`: scope, names, subresources.
pub const TRIGGER_AUTHENTICATION_NAMES: Names = Names {
    scope: "Namespaced",
    kind: "TriggerAuthentication",
    list_kind: "TriggerAuthenticationList",
    plural: "triggerauthentications",
    singular: "triggerauthentication",
    short_names: &["ta", "triggerauth"],
    categories: &[],
    subresources: r#"{"status":{}}"#,
};

/// `keda.sh_clustertriggerauthentications.yaml`: `additionalPrinterColumns` in order: name, type, JSONPath, priority.
pub const CLUSTER_TRIGGER_AUTHENTICATION_COLUMNS: &[Column] = &[
    ("PodIdentity", "string", ".spec.podIdentity.provider", 0),
    ("Secret", "string", ".spec.secretTargetRef[*].name", 0),
    ("Env", "string", ".spec.env[*].name", 0),
    ("FilePath", "string", ".spec.filePath", 0),
    ("VaultAddress", "string", ".spec.hashiCorpVault.address", 0),
    ("ScaledObjects", "string", ".status.scaledobjects", 1),
    ("ScaledJobs", "string", ".status.scaledjobs", 1),
];

/// `keda.sh_clustertriggerauthentications.yaml`: scope, names, subresources.
pub const CLUSTER_TRIGGER_AUTHENTICATION_NAMES: Names = Names {
    scope: "Cluster",
    kind: "ClusterTriggerAuthentication",
    list_kind: "ClusterTriggerAuthenticationList",
    plural: "clustertriggerauthentications",
    singular: "clustertriggerauthentication",
    short_names: &["cta", "clustertriggerauth"],
    categories: &[],
    subresources: r#"{"status":{}}"#,
};

/// `eventing.keda.sh_cloudeventsources.yaml`: `additionalPrinterColumns` in order: name, type, JSONPath, priority.
pub const CLOUD_EVENT_SOURCE_COLUMNS: &[Column] = &[(
    "Active",
    "string",
    r#".status.conditions[?(@.type=="Active")].status"#,
    0,
)];

/// `eventing.keda.sh_cloudeventsources.yaml`: scope, names, subresources.
pub const CLOUD_EVENT_SOURCE_NAMES: Names = Names {
    scope: "Namespaced",
    kind: "CloudEventSource",
    list_kind: "CloudEventSourceList",
    plural: "cloudeventsources",
    singular: "cloudeventsource",
    short_names: &[],
    categories: &[],
    subresources: r#"{"status":{}}"#,
};

/// `eventing.keda.sh_clustercloudeventsources.yaml`: `additionalPrinterColumns` in order: name, type, JSONPath, priority.
pub const CLUSTER_CLOUD_EVENT_SOURCE_COLUMNS: &[Column] = &[(
    "Active",
    "string",
    r#".status.conditions[?(@.type=="Active")].status"#,
    0,
)];

/// `eventing.keda.sh_clustercloudeventsources.yaml`: scope, names, subresources.
pub const CLUSTER_CLOUD_EVENT_SOURCE_NAMES: Names = Names {
    scope: "Cluster",
    kind: "ClusterCloudEventSource",
    list_kind: "ClusterCloudEventSourceList",
    plural: "clustercloudeventsources",
    singular: "clustercloudeventsource",
    short_names: &[],
    categories: &[],
    subresources: r#"{"status":{}}"#,
};
