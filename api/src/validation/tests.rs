use super::*;
use crate::scaled_job::ScaledJob;
use crate::scaled_object::{
    AdvancedConfig, Fallback, HorizontalPodAutoscalerConfig, ScaleTarget, ScaledObjectSpec,
    ScalingModifiers,
};
use crate::scaled_object::{FallbackBehavior, ScaledObject};
use crate::trigger::ScaleTrigger;
use crate::trigger_authentication::{AuthPodIdentity, OAuth2};
use crate::trigger_authentication::{
    ClusterTriggerAuthentication, TriggerAuthentication, TriggerAuthenticationSpec,
};

fn trigger(type_: &str, name: &str) -> ScaleTrigger {
    ScaleTrigger {
        type_: type_.into(),
        name: name.into(),
        ..ScaleTrigger::default()
    }
}

fn base_so() -> ScaledObject {
    ScaledObject::new(
        "worker",
        ScaledObjectSpec {
            scale_target_ref: ScaleTarget {
                name: "worker".into(),
                ..ScaleTarget::default()
            },
            triggers: vec![trigger("redis", "")],
            ..ScaledObjectSpec::default()
        },
    )
}

fn modifiers(so: &mut ScaledObject, m: ScalingModifiers) {
    so.spec.advanced = Some(Box::new(AdvancedConfig {
        scaling_modifiers: Some(m),
        ..AdvancedConfig::default()
    }));
}

fn rules(result: Result<(), ValidationErrors>) -> Vec<&'static str> {
    result.err().map_or_else(Vec::new, |e| {
        e.errors().iter().map(ValidationError::rule).collect()
    })
}

#[test]
fn scaled_object_rules() {
    type Case = (&'static str, fn(&mut ScaledObject), &'static [&'static str]);
    let cases: &[Case] = &[
        ("a plain redis ScaledObject is valid", |_| {}, &[]),
        (
            "zero triggers",
            |so| so.spec.triggers.clear(),
            &["no-triggers"],
        ),
        (
            "two triggers named alike",
            |so| so.spec.triggers = vec![trigger("redis", "q"), trigger("kafka", "q")],
            &["duplicate-trigger-name"],
        ),
        (
            "unnamed triggers never collide",
            |so| so.spec.triggers = vec![trigger("redis", ""), trigger("kafka", "")],
            &[],
        ),
        (
            "useCachedMetrics on cron",
            |so| {
                so.spec.triggers[0] = trigger("cron", "");
                so.spec.triggers[0].use_cached_metrics = true;
            },
            &["cached-metrics-not-supported"],
        ),
        (
            "useCachedMetrics on redis is fine",
            |so| so.spec.triggers[0].use_cached_metrics = true,
            &[],
        ),
        (
            "min above max",
            |so| {
                so.spec.min_replica_count = Some(5);
                so.spec.max_replica_count = Some(3);
            },
            &["min-above-max"],
        ),
        (
            "min above the default max of 100",
            |so| so.spec.min_replica_count = Some(101),
            &["min-above-max"],
        ),
        (
            "idle equal to min",
            |so| {
                so.spec.min_replica_count = Some(2);
                so.spec.idle_replica_count = Some(2);
            },
            &["idle-not-below-min"],
        ),
        (
            "idle 0 with min unset: effective min is 0",
            |so| so.spec.idle_replica_count = Some(0),
            &["idle-not-below-min"],
        ),
        (
            "idle 0 with min 0 set: KEDA counts min as 1, accepted",
            |so| {
                so.spec.min_replica_count = Some(0);
                so.spec.idle_replica_count = Some(0);
            },
            &[],
        ),
        (
            "only cpu and memory with min unset",
            |so| so.spec.triggers = vec![trigger("cpu", ""), trigger("memory", "")],
            &["scale-to-zero-requirements-not-met"],
        ),
        (
            "only cpu with min 0 on a StatefulSet",
            |so| {
                so.spec.triggers = vec![trigger("cpu", "")];
                so.spec.min_replica_count = Some(0);
                so.spec.scale_target_ref.kind = Some("StatefulSet".to_string());
            },
            &["scale-to-zero-requirements-not-met"],
        ),
        (
            // KEDA's webhook returns before this check for any kind but Deployment and
            // StatefulSet.
            "only cpu with min unset on an Argo Rollout is accepted",
            |so| {
                so.spec.triggers = vec![trigger("cpu", "")];
                so.spec.scale_target_ref.api_version = Some("argoproj.io/v1alpha1".to_string());
                so.spec.scale_target_ref.kind = Some("Rollout".to_string());
            },
            &[],
        ),
        (
            "only memory with min 0 on an extensions/v1beta1 Deployment is accepted",
            |so| {
                so.spec.triggers = vec![trigger("memory", "")];
                so.spec.min_replica_count = Some(0);
                so.spec.scale_target_ref.api_version = Some("extensions/v1beta1".to_string());
            },
            &[],
        ),
        (
            "only cpu with min 1",
            |so| {
                so.spec.triggers = vec![trigger("cpu", "")];
                so.spec.min_replica_count = Some(1);
            },
            &[],
        ),
        (
            "negative fallback numbers are both reported",
            |so| {
                so.spec.fallback = Some(Fallback {
                    failure_threshold: -1,
                    replicas: -2,
                    behavior: None,
                })
            },
            &["negative-fallback", "negative-fallback"],
        ),
        (
            "fallback with only cpu",
            |so| {
                so.spec.triggers = vec![trigger("cpu", "")];
                so.spec.min_replica_count = Some(1);
                so.spec.fallback = Some(Fallback::default());
            },
            &["fallback-needs-external-trigger"],
        ),
        (
            "fallback behavior scalingModifiers without formula",
            |so| {
                so.spec.fallback = Some(Fallback {
                    behavior: Some(FallbackBehavior::ScalingModifiers),
                    ..Fallback::default()
                })
            },
            &["fallback-behavior-needs-formula"],
        ),
        (
            "modifiers without formula",
            |so| {
                modifiers(
                    so,
                    ScalingModifiers {
                        target: Some("2".into()),
                        ..ScalingModifiers::default()
                    },
                )
            },
            &["scaling-modifiers-formula-missing"],
        ),
        (
            "formula without target",
            |so| {
                so.spec.triggers = vec![trigger("redis", "a"), trigger("kafka", "b")];
                modifiers(
                    so,
                    ScalingModifiers {
                        formula: Some("a + b".into()),
                        ..ScalingModifiers::default()
                    },
                )
            },
            &["scaling-modifiers-target-missing"],
        ),
        (
            "a formula over a trigger without a name",
            |so| {
                modifiers(
                    so,
                    ScalingModifiers {
                        formula: Some("a + 1".into()),
                        target: Some("1".into()),
                        ..ScalingModifiers::default()
                    },
                )
            },
            &["scaling-modifiers-formula-invalid"],
        ),
        (
            "a formula bomb: nested count over array literals",
            |so| {
                let ones = format!("[{}]", vec!["1"; 100].join(","));
                modifiers(
                    so,
                    ScalingModifiers {
                        formula: Some(format!(
                            "count({ones}, count({ones}, count({ones}, # > 0) > 0) > 0)"
                        )),
                        target: Some("1".into()),
                        ..ScalingModifiers::default()
                    },
                )
            },
            &["scaling-modifiers-formula-invalid"],
        ),
        (
            "target zero, activation not a number, metricType Utilization",
            |so| {
                so.spec.triggers[0].name = "a".into();
                modifiers(
                    so,
                    ScalingModifiers {
                        formula: Some("a".into()),
                        target: Some("0".into()),
                        activation_target: Some("x".into()),
                        metric_type: Some("Utilization".into()),
                    },
                )
            },
            &[
                "scaling-modifiers-target-invalid",
                "scaling-modifiers-activation-target-invalid",
                "scaling-modifiers-metric-type-invalid",
            ],
        ),
        (
            "target and activation target too large for a number (1e400 reads as infinity)",
            |so| {
                so.spec.triggers[0].name = "a".into();
                modifiers(
                    so,
                    ScalingModifiers {
                        formula: Some("a".into()),
                        target: Some("1e400".into()),
                        activation_target: Some("-1e400".into()),
                        metric_type: None,
                    },
                )
            },
            &[
                "scaling-modifiers-target-invalid",
                "scaling-modifiers-activation-target-invalid",
            ],
        ),
        (
            "complete modifiers with fallback on cpu only are fine",
            |so| {
                so.spec.triggers = vec![trigger("cpu", "c")];
                so.spec.min_replica_count = Some(1);
                so.spec.fallback = Some(Fallback {
                    behavior: Some(FallbackBehavior::ScalingModifiers),
                    ..Fallback::default()
                });
                modifiers(
                    so,
                    ScalingModifiers {
                        // A constant: cpu and memory triggers are no formula inputs.
                        formula: Some("2".into()),
                        target: Some("1.5".into()),
                        ..ScalingModifiers::default()
                    },
                )
            },
            &[],
        ),
        (
            "name of 64 characters: too long, and so is the derived HPA name",
            |so| so.metadata.name = Some("a".repeat(64)),
            &["name-too-long", "hpa-name-too-long"],
        ),
        (
            "name of 60 characters: the derived HPA name has 69",
            |so| so.metadata.name = Some("a".repeat(60)),
            &["hpa-name-too-long"],
        ),
        (
            "long name with a short custom HPA name is fine",
            |so| {
                so.metadata.name = Some("a".repeat(60));
                so.spec.advanced = Some(Box::new(AdvancedConfig {
                    horizontal_pod_autoscaler_config: Some(HorizontalPodAutoscalerConfig {
                        name: Some("short".into()),
                        behavior: None,
                    }),
                    ..AdvancedConfig::default()
                }));
            },
            &[],
        ),
    ];
    for (what, mutate, want) in cases {
        let mut so = base_so();
        mutate(&mut so);
        assert_eq!(
            rules(validate_scaled_object_admission(&so)),
            *want,
            "{what}"
        );
    }
}

/// KEDA's reconcile runs only `ValidateTriggers`, `CheckReplicaCountBoundsAreValid` and the
/// scalingModifiers compile; what its webhook alone refuses, the operator runs (issue 29,
/// row 3).
#[test]
fn the_reconcile_set_holds_only_keda_s_reconcile_rules() {
    type Case = (&'static str, fn(&mut ScaledObject), &'static [&'static str]);
    let admission_only: &[Case] = &[
        (
            "cpu only with min unset on a Deployment",
            |so| so.spec.triggers = vec![trigger("cpu", "")],
            &["scale-to-zero-requirements-not-met"],
        ),
        (
            "fallback on a memory-only object, negative numbers",
            |so| {
                so.spec.triggers = vec![trigger("memory", "")];
                so.spec.min_replica_count = Some(1);
                so.spec.fallback = Some(Fallback {
                    failure_threshold: -1,
                    replicas: 2,
                    behavior: Some(FallbackBehavior::ScalingModifiers),
                });
            },
            &[
                "negative-fallback",
                "fallback-needs-external-trigger",
                "fallback-behavior-needs-formula",
            ],
        ),
        (
            "a name of 64 characters",
            |so| so.metadata.name = Some("a".repeat(64)),
            &["name-too-long", "hpa-name-too-long"],
        ),
    ];
    for (what, mutate, want) in admission_only {
        let mut so = base_so();
        mutate(&mut so);
        assert_eq!(
            rules(validate_scaled_object_admission(&so)),
            *want,
            "{what}"
        );
        assert_eq!(
            validate_scaled_object_reconcile(&so),
            Ok(()),
            "{what}: admission only"
        );
    }
    // Reconcile rules stay refused at reconcile, and the admission-only rule beside them
    // is left out.
    let mut so = base_so();
    so.metadata.name = Some("a".repeat(60));
    so.spec.min_replica_count = Some(5);
    so.spec.max_replica_count = Some(2);
    so.spec.triggers = vec![trigger("redis", "q"), trigger("redis", "q")];
    modifiers(
        &mut so,
        ScalingModifiers {
            formula: Some("q +".into()),
            target: Some("1".into()),
            ..ScalingModifiers::default()
        },
    );
    assert_eq!(
        rules(validate_scaled_object_reconcile(&so)),
        [
            "duplicate-trigger-name",
            "min-above-max",
            "scaling-modifiers-formula-invalid"
        ]
    );
    assert_eq!(
        rules(validate_scaled_object_admission(&so)),
        [
            "duplicate-trigger-name",
            "min-above-max",
            "scaling-modifiers-formula-invalid",
            "hpa-name-too-long"
        ]
    );
}
#[test]
fn messages_name_the_field_and_the_rule() {
    let mut so = base_so();
    so.spec.min_replica_count = Some(2);
    so.spec.idle_replica_count = Some(3);
    so.spec.triggers = vec![trigger("redis", "queue"), trigger("redis", "queue")];
    let err = validate_scaled_object_admission(&so).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.triggers[1].name: \"queue\" is defined multiple times, trigger names must be unique; \
             spec.idleReplicaCount (3) must be less than spec.minReplicaCount (2)"
    );
}

#[test]
fn scaled_job_rules() {
    let mut sj = ScaledJob::new("job", Default::default());
    assert_eq!(
        rules(validate_scaled_job(&sj)),
        ["no-triggers"],
        "no trigger"
    );
    sj.spec.triggers = vec![trigger("redis", "a"), trigger("memory", "a")];
    sj.spec.triggers[1].use_cached_metrics = true;
    sj.spec.triggers[0].metric_type = Some("Value".into());
    assert_eq!(
        rules(validate_scaled_job(&sj)),
        [
            "duplicate-trigger-name",
            "cached-metrics-not-supported",
            "scaledjob-metric-type"
        ]
    );
}

#[test]
fn a_running_job_percentage_out_of_range_names_the_field_and_the_bound() {
    let mut sj = ScaledJob::new("job", Default::default());
    sj.spec.triggers = vec![trigger("redis", "a")];
    let with = |sj: &mut ScaledJob, percentage: &str| {
        sj.spec.scaling_strategy = Some(crate::scaled_job::ScalingStrategy {
            strategy: Some("custom".into()),
            custom_scaling_running_job_percentage: Some(percentage.into()),
            ..Default::default()
        });
    };
    // In range, and (as in KEDA) not a number at all: accepted.
    for ok in ["0", "0.5", "100", "half"] {
        with(&mut sj, ok);
        assert_eq!(validate_scaled_job(&sj), Ok(()), "{ok}");
    }
    for bad in ["1e300", "-0.5", "100.5", "NaN", "inf"] {
        with(&mut sj, bad);
        let err = validate_scaled_job(&sj).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "spec.scalingStrategy.customScalingRunningJobPercentage ({bad}) must be between 0 and 100"
            )
        );
        assert_eq!(rules(Err(err)), ["out-of-range"]);
    }
}

#[test]
fn trigger_authentication_rules() {
    type Case = (
        &'static str,
        fn(&mut TriggerAuthenticationSpec),
        &'static [&'static str],
    );
    fn identity(provider: &str) -> AuthPodIdentity {
        AuthPodIdentity {
            provider: provider.into(),
            ..AuthPodIdentity::default()
        }
    }
    fn oauth2() -> OAuth2 {
        OAuth2 {
            type_: Some("clientCredentials".into()),
            client_id: "id".into(),
            token_url: "https://auth.example.com/token".into(),
            ..OAuth2::default()
        }
    }
    let cases: &[Case] = &[
        ("empty spec is valid", |_| {}, &[]),
        (
            "provider none is valid",
            |s| s.pod_identity = Some(identity("none")),
            &[],
        ),
        (
            "azure identityId set but empty",
            |s| {
                let mut p = identity("azure-workload");
                p.identity_id = Some(String::new());
                s.pod_identity = Some(p);
            },
            &["empty-identity-id"],
        ),
        (
            "azure identityTenantId set but empty",
            |s| {
                let mut p = identity("azure-workload");
                p.identity_tenant_id = Some(String::new());
                s.pod_identity = Some(p);
            },
            &["empty-identity-tenant-id"],
        ),
        (
            "azure authority host without tenant",
            |s| {
                let mut p = identity("azure-workload");
                p.identity_authority_host = Some("https://login".into());
                s.pod_identity = Some(p);
            },
            &["authority-host-without-tenant"],
        ),
        (
            "aws roleArn with workload owner",
            |s| {
                let mut p = identity("aws");
                p.role_arn = Some("arn:aws:iam::1:role/r".into());
                p.identity_owner = Some("workload".into());
                s.pod_identity = Some(p);
            },
            &["role-arn-with-workload-owner"],
        ),
        (
            "aws externalID without roleArn",
            |s| {
                let mut p = identity("aws");
                p.external_id = Some("x".into());
                s.pod_identity = Some(p);
            },
            &["external-id-without-role-arn"],
        ),
        (
            "complete oauth2 is valid",
            |s| s.oauth2 = Some(oauth2()),
            &[],
        ),
        (
            "oauth2 without type is clientCredentials, KEDA's default",
            |s| {
                let mut o = oauth2();
                o.type_ = None;
                s.oauth2 = Some(o);
            },
            &[],
        ),
        (
            "oauth2 wrong type, no client id, ftp token url",
            |s| {
                let mut o = oauth2();
                o.type_ = Some("password".into());
                o.client_id.clear();
                o.token_url = "ftp://auth.example.com/token".into();
                s.oauth2 = Some(o);
            },
            &[
                "oauth2-type",
                "oauth2-client-id-missing",
                "oauth2-token-url-invalid",
            ],
        ),
        (
            "oauth2 without token url",
            |s| {
                let mut o = oauth2();
                o.token_url.clear();
                s.oauth2 = Some(o);
            },
            &["oauth2-token-url-missing"],
        ),
        (
            "oauth2 token url without host",
            |s| {
                let mut o = oauth2();
                o.token_url = "https:///token".into();
                s.oauth2 = Some(o);
            },
            &["oauth2-token-url-invalid"],
        ),
    ];
    for (what, mutate, want) in cases {
        let mut spec = TriggerAuthenticationSpec::default();
        mutate(&mut spec);
        assert_eq!(
            rules(validate_trigger_authentication_spec(&spec)),
            *want,
            "{what}"
        );
    }
}

#[test]
fn file_path_is_refused_on_namespaced_trigger_authentication_only() {
    let spec = TriggerAuthenticationSpec {
        file_path: Some("creds.json".to_string()),
        ..TriggerAuthenticationSpec::default()
    };
    let ta = TriggerAuthentication::new("a", spec.clone());
    assert_eq!(
        rules(validate_trigger_authentication(&ta)),
        ["file-path-not-cluster-scoped"]
    );
    let cta = ClusterTriggerAuthentication::new("a", spec.into());
    assert_eq!(
        rules(validate_cluster_trigger_authentication(&cta)),
        Vec::<&str>::new()
    );
}
