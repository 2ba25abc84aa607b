//! `apache-kafka`: KEDA's second Kafka trigger (`pkg/scalers/apache_kafka_scaler.go`, written on
//! segmentio/kafka-go), on the same shared cluster client and group readers as `kafka`.
//!
//! Its parameters are KEDA's for this type: `topic` is a comma-separated list (the metric is
//! `s<i>-kafka-<t1,t2>`, normalized as KEDA does: the comma stays), `sasl` takes `aws_msk_iam` itself (no
//! `saslTokenProvider`, no OAuth bearer, no Kerberos parameters), there is no `unsafeSsl`,
//! `version` or `fullMetadata`, and `sasl` or `tls` given both in the metadata and in the
//! TriggerAuthentication is refused. The lag is read and computed by `kafka`'s code (see
//! `docs/scalers/apache-kafka.md` for where that differs from KEDA's apache-kafka).

use super::{
    ACTIVATION_LAG_THRESHOLD, ALLOW_IDLE_CONSUMERS, AWS_REGION, BOOTSTRAP_SERVERS, CA, CERT,
    CONSUMER_GROUP, ENSURE_EVEN_DISTRIBUTION, EXCLUDE_PERSISTENT_LAG, KEY, KEY_PASSWORD,
    KafkaConfig, KafkaScaler, LAG_THRESHOLD, LIMIT_TO_PARTITIONS_WITH_LAG, METADATA_AUTH,
    OFFSET_RESET_POLICY, PARTITION_LIMITATION, PASSWORD, SCALE_TO_ZERO_ON_INVALID_OFFSET, TLS,
    TOPIC, USERNAME, check_rules, cluster_settings,
};
use crate::aws;
use crate::context::ScalerContext;
use crate::error::ScalerError;
use crate::metadata::Param;
use crate::scaler::BuiltScaler;
use crate::scalers::kafka::lag::{LagRules, OffsetResetPolicy, parse_partition_limitation};
use keda_api::metric_name;

/// KEDA's `sasl` of `apache-kafka`.
const SASL: Param = Param::optional("sasl")
    .order(METADATA_AUTH)
    .default("none")
    .allowed(&[
        "none",
        "plaintext",
        "scram_sha256",
        "scram_sha512",
        "gssapi",
        "aws_msk_iam",
    ]);

/// Every parameter of the `apache-kafka` trigger, as KEDA names them.
pub const PARAMS: &[Param] = &[
    BOOTSTRAP_SERVERS,
    CONSUMER_GROUP,
    TOPIC,
    PARTITION_LIMITATION,
    LAG_THRESHOLD,
    ACTIVATION_LAG_THRESHOLD,
    OFFSET_RESET_POLICY,
    ALLOW_IDLE_CONSUMERS,
    EXCLUDE_PERSISTENT_LAG,
    SCALE_TO_ZERO_ON_INVALID_OFFSET,
    LIMIT_TO_PARTITIONS_WITH_LAG,
    ENSURE_EVEN_DISTRIBUTION,
    SASL,
    USERNAME,
    PASSWORD,
    AWS_REGION,
    TLS,
    CERT,
    KEY,
    KEY_PASSWORD,
    CA,
    aws::IDENTITY_OWNER,
    aws::AWS_ROLE_ARN,
    aws::AWS_EXTERNAL_ID,
    aws::AWS_ACCESS_KEY_ID_AUTH,
    aws::AWS_SECRET_ACCESS_KEY_AUTH,
    aws::AWS_SESSION_TOKEN,
    aws::AWS_ACCESS_KEY_ID_METADATA,
    aws::AWS_SECRET_ACCESS_KEY_ENV,
];

/// Parses an `apache-kafka` trigger into the configuration `kafka`'s scaler reads.
///
/// # Errors
/// Invalid or missing parameters, contradicting options, `sasl` or `tls` in both the metadata
/// and the TriggerAuthentication, or `gssapi` (not supported by keda-rs).
pub fn parse(ctx: &ScalerContext) -> Result<KafkaConfig, ScalerError> {
    let metric_type = ctx.external_metric_type()?;
    let (mut config, msk) = ctx.parse(|p| {
        for name in ["sasl", "tls"] {
            let in_metadata = ctx.metadata.get(name).is_some_and(|v| !v.trim().is_empty());
            let in_auth = ctx
                .auth_params
                .get(name)
                .is_some_and(|v| !v.expose().trim().is_empty());
            if in_metadata && in_auth {
                return Err(p.rule(format!(
                    "unable to set \"{name}\" in both the trigger metadata and the TriggerAuthentication"
                )));
            }
        }
        let group: String = p.get(&CONSUMER_GROUP)?;
        let topics: Vec<String> = p
            .get_opt::<Vec<String>>(&TOPIC)?
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect();
        let rules = LagRules {
            lag_threshold: p.get(&LAG_THRESHOLD)?,
            offset_reset_policy: match p.get::<String>(&OFFSET_RESET_POLICY)?.as_str() {
                "earliest" => OffsetResetPolicy::Earliest,
                _ => OffsetResetPolicy::Latest,
            },
            scale_to_zero_on_invalid_offset: p.get(&SCALE_TO_ZERO_ON_INVALID_OFFSET)?,
            allow_idle_consumers: p.get(&ALLOW_IDLE_CONSUMERS)?,
            exclude_persistent_lag: p.get(&EXCLUDE_PERSISTENT_LAG)?,
            limit_to_partitions_with_lag: p.get(&LIMIT_TO_PARTITIONS_WITH_LAG)?,
            ensure_even_distribution: p.get(&ENSURE_EVEN_DISTRIBUTION)?,
        };
        check_rules(p, &rules, !topics.is_empty())?;
        // KEDA: without topics, partitionLimitation is ignored.
        let partition_limitation = match p.get_opt::<String>(&PARTITION_LIMITATION)? {
            Some(raw) if !topics.is_empty() => Some(
                parse_partition_limitation(&raw)
                    .map_err(|e| p.rule(format!("parameter \"partitionLimitation\": {e}")))?,
            ),
            _ => None,
        };
        let name = if topics.is_empty() {
            format!("kafka-{group}-topics")
        } else {
            format!("kafka-{}", topics.join(","))
        };
        let (cluster, msk) = cluster_settings(p, &SASL, false)?;
        let config = KafkaConfig {
            cluster,
            metric_name: metric_name::with_index(
                ctx.trigger_index,
                &metric_name::normalize(&name),
            ),
            group,
            topics,
            partition_limitation,
            activation_lag_threshold: p.get(&ACTIVATION_LAG_THRESHOLD)?,
            rules,
            metric_type,
        };
        Ok((config, msk))
    })?;
    super::with_msk(ctx, &mut config, msk)?;
    Ok(config)
}

/// Factory of `apache-kafka`.
///
/// # Errors
/// See [`parse`] and [`KafkaScaler::build_from`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    let config = parse(&ctx)?;
    Ok(BuiltScaler::Pull(Box::new(
        KafkaScaler::build_from(&ctx, config).await?,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;
    use crate::scalers::kafka::client::Sasl;

    fn ctx(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
        test_context("apache-kafka", 0, metadata, &[], auth)
    }

    const BASE: &[(&str, &str)] = &[
        ("bootstrapServers", "kafka-1:9092,kafka-2:9092"),
        ("consumerGroup", "workers"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut metadata = BASE.to_vec();
        metadata.extend_from_slice(extra);
        metadata
    }

    #[test]
    fn topics_are_a_list_and_name_the_metric_as_keda_does() {
        let c = parse(&ctx(&with(&[("topic", "orders, payments")]), &[])).expect("parses");
        assert_eq!(c.topics, vec!["orders".to_string(), "payments".to_string()]);
        assert_eq!(c.metric_name, "s0-kafka-orders,payments");
        assert_eq!(c.rules.lag_threshold, 10);
        assert_eq!(c.cluster.bootstrap_servers.len(), 2);
        assert!(c.cluster.sasl.is_none() && c.cluster.tls.is_none());
        let c = parse(&ctx(&with(&[("partitionLimitation", "1,2")]), &[])).expect("parses");
        assert!(c.topics.is_empty());
        assert_eq!(c.metric_name, "s0-kafka-workers-topics");
        // Ignored without topics, as in KEDA.
        assert_eq!(c.partition_limitation, None);
        let c = parse(&ctx(
            &with(&[("topic", "a"), ("partitionLimitation", "1,3-4")]),
            &[],
        ))
        .expect("parses");
        assert_eq!(c.partition_limitation, Some(vec![1, 3, 4]));
    }

    #[test]
    fn keda_refusals_name_the_parameter() {
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        let rows: &[(Pairs, Pairs, &str)] = &[
            (&[("lagThreshold", "0")], &[], "lagThreshold"),
            (
                &[("activationLagThreshold", "-1")],
                &[],
                "activationLagThreshold",
            ),
            (
                &[
                    ("allowIdleConsumers", "true"),
                    ("limitToPartitionsWithLag", "true"),
                    ("topic", "a"),
                ],
                &[],
                "allowIdleConsumers",
            ),
            (&[("limitToPartitionsWithLag", "true")], &[], "topic"),
            (&[("offsetResetPolicy", "middle")], &[], "offsetResetPolicy"),
            (&[("sasl", "oauthbearer")], &[], "sasl"),
            (&[("sasl", "plaintext")], &[("username", "u")], "password"),
            (
                &[("sasl", "plaintext")],
                &[("sasl", "plaintext"), ("username", "u"), ("password", "p")],
                "\"sasl\" in both",
            ),
            (
                &[("tls", "enable")],
                &[("tls", "enable")],
                "\"tls\" in both",
            ),
            (
                &[("tls", "enable")],
                &[("cert", "c")],
                "\"cert\" and \"key\"",
            ),
            (
                &[("sasl", "aws_msk_iam"), ("tls", "enable")],
                &[],
                "awsRegion",
            ),
            (
                &[("sasl", "aws_msk_iam"), ("awsRegion", "eu-west-1")],
                &[],
                "TLS must be enabled",
            ),
            (&[("sasl", "gssapi")], &[], "gssapi"),
            (
                &[("unsafeSsl", "true"), ("tls", "enable"), ("topic", "a")],
                &[],
                "",
            ),
        ];
        for (metadata, auth, expected) in rows {
            let mut all = BASE.to_vec();
            all.extend_from_slice(metadata);
            let result = parse(&ctx(&all, auth));
            if expected.is_empty() {
                // unsafeSsl is no parameter of apache-kafka: never skips verification.
                let c = result.expect("parses");
                assert!(!c.cluster.tls.expect("tls").insecure);
                continue;
            }
            let err = result.expect_err(expected).to_string();
            assert!(err.contains(expected), "{metadata:?}: {err}");
            assert!(err.contains("(apache-kafka)"), "{err}");
        }
    }

    #[test]
    fn sasl_and_tls_come_from_the_authentication() {
        let c = parse(&ctx(
            BASE,
            &[
                ("sasl", "scram_sha512"),
                ("username", "u"),
                ("password", "p"),
                ("tls", "enable"),
            ],
        ))
        .expect("parses");
        assert!(matches!(c.cluster.sasl, Some(Sasl::Password(_))));
        assert!(c.cluster.tls.is_some());
    }
}
