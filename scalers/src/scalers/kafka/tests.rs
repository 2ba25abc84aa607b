use super::*;

fn ctx(index: usize, metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
    ScalerContext {
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        auth_params: auth
            .iter()
            .map(|(k, v)| (k.to_string(), Secret::new(*v)))
            .collect(),
        ..ScalerContext::new("kafka", index)
    }
}

const BASE: &[(&str, &str)] = &[
    ("bootstrapServers", "k1:9092, k2:9092"),
    ("consumerGroup", "g"),
];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut all = BASE.to_vec();
    all.extend_from_slice(extra);
    all
}

#[test]
fn defaults_and_metric_names() {
    let c = KafkaConfig::parse(&ctx(1, &with(&[("topic", "orders.v1")]), &[])).expect("ok");
    assert_eq!(c.metric_name, "s1-kafka-orders-v1");
    assert_eq!(c.rules.lag_threshold, 10);
    assert_eq!(c.activation_lag_threshold, 0);
    assert_eq!(c.rules.offset_reset_policy, OffsetResetPolicy::Latest);
    assert!(!c.rules.allow_idle_consumers && !c.rules.exclude_persistent_lag);
    assert_eq!(c.cluster.bootstrap_servers, vec!["k1:9092", "k2:9092"]);
    assert_eq!(
        (c.cluster.sasl.as_ref(), c.cluster.tls.as_ref()),
        (None, None)
    );

    let c = KafkaConfig::parse(&ctx(0, BASE, &[])).expect("ok");
    assert_eq!(c.metric_name, "s0-kafka-g-topics");
    assert!(c.topics.is_empty());
}

#[test]
fn partition_limitation_applies_only_with_a_topic() {
    let limit = [("partitionLimitation", "0,2-3")];
    let c = KafkaConfig::parse(&ctx(0, &with(&[("topic", "t"), limit[0]]), &[])).expect("ok");
    assert_eq!(c.partition_limitation, Some(vec![0, 2, 3]));
    let c = KafkaConfig::parse(&ctx(0, &with(&limit), &[])).expect("ok");
    assert_eq!(c.partition_limitation, None);
}

#[test]
fn sasl_and_tls_come_from_metadata_or_trigger_authentication() {
    let c = KafkaConfig::parse(&ctx(
        0,
        &with(&[("topic", "t"), ("unsafeSsl", "true")]),
        &[
            ("sasl", "scram_sha256"),
            ("username", "u"),
            ("password", "p"),
            ("tls", "enable"),
            ("ca", "CA"),
            ("cert", "C"),
            ("key", "K"),
            ("keyPassword", "KP"),
        ],
    ))
    .expect("ok");
    let Some(Sasl::Password(sasl)) = c.cluster.sasl else {
        panic!("password SASL expected");
    };
    assert_eq!(sasl.mechanism, SaslMechanism::ScramSha256);
    assert_eq!((sasl.username.as_str(), sasl.password.expose()), ("u", "p"));
    let tls = c.cluster.tls.expect("tls");
    assert!(tls.insecure);
    assert_eq!(tls.key_password.as_ref().map(Secret::expose), Some("KP"));
    // `version` and `fullMetadata` are accepted and have no effect.
    KafkaConfig::parse(&ctx(
        0,
        &with(&[("version", "2.8.0"), ("fullMetadata", "false")]),
        &[],
    ))
    .expect("accepted");
}

#[test]
fn parse_errors_name_the_parameter() {
    for (metadata, auth, expected) in [
        (
            vec![("consumerGroup", "g")],
            vec![],
            r#"trigger 0 (kafka): missing required parameter "bootstrapServers""#,
        ),
        (
            vec![("bootstrapServers", "k:9092")],
            vec![],
            r#"trigger 0 (kafka): missing required parameter "consumerGroup""#,
        ),
        (
            with(&[("lagThreshold", "0")]),
            vec![],
            r#"trigger 0 (kafka): parameter "lagThreshold": "0" is not at least 1"#,
        ),
        (
            with(&[("activationLagThreshold", "-1")]),
            vec![],
            r#"trigger 0 (kafka): parameter "activationLagThreshold": "-1" is not at least 0"#,
        ),
        (
            with(&[("offsetResetPolicy", "newest")]),
            vec![],
            r#"trigger 0 (kafka): parameter "offsetResetPolicy": "newest" is not one of latest, earliest"#,
        ),
        (
            with(&[("topic", "t"), ("partitionLimitation", "1,a")]),
            vec![],
            r#"trigger 0 (kafka): parameter "partitionLimitation": invalid partition limitation: "a""#,
        ),
        (
            with(&[
                ("topic", "t"),
                ("allowIdleConsumers", "true"),
                ("limitToPartitionsWithLag", "true"),
            ]),
            vec![],
            r#"trigger 0 (kafka): "allowIdleConsumers" and "limitToPartitionsWithLag" cannot both be true"#,
        ),
        (
            with(&[
                ("topic", "t"),
                ("ensureEvenDistributionOfPartitions", "true"),
                ("limitToPartitionsWithLag", "true"),
            ]),
            vec![],
            r#"trigger 0 (kafka): "limitToPartitionsWithLag" and "ensureEvenDistributionOfPartitions" cannot both be true"#,
        ),
        (
            with(&[("limitToPartitionsWithLag", "true")]),
            vec![],
            r#"trigger 0 (kafka): parameter "topic" is required when "limitToPartitionsWithLag" is true"#,
        ),
        (
            with(&[("ensureEvenDistributionOfPartitions", "true")]),
            vec![],
            r#"trigger 0 (kafka): parameter "topic" is required when "ensureEvenDistributionOfPartitions" is true"#,
        ),
        (
            with(&[("sasl", "plaintext")]),
            vec![("password", "p")],
            r#"trigger 0 (kafka): missing required parameter "username""#,
        ),
        (
            with(&[]),
            vec![("sasl", "scram_sha512"), ("username", "u")],
            r#"trigger 0 (kafka): missing required parameter "password""#,
        ),
        (
            with(&[("sasl", "kerberos")]),
            vec![],
            r#"trigger 0 (kafka): parameter "sasl": "kerberos" is not one of none, plaintext, scram_sha256, scram_sha512, oauthbearer, gssapi"#,
        ),
        (
            with(&[("tls", "on")]),
            vec![],
            r#"trigger 0 (kafka): parameter "tls": "on" is not one of enable, disable"#,
        ),
        (
            with(&[("tls", "enable")]),
            vec![("cert", "C")],
            r#"trigger 0 (kafka): parameters "cert" and "key" must be given together"#,
        ),
        (
            with(&[("allowIdleConsumers", "yes")]),
            vec![],
            r#"trigger 0 (kafka): parameter "allowIdleConsumers": "yes" is not a valid boolean"#,
        ),
    ] {
        let err = KafkaConfig::parse(&ctx(0, &metadata, &auth)).expect_err(expected);
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn unsupported_sasl_modes_are_rejected_with_the_reason() {
    for (metadata, auth, needle) in [
        (
            with(&[]),
            vec![("sasl", "gssapi")],
            "\"gssapi\" (Kerberos) is not supported by keda-rs",
        ),
        (
            with(&[]),
            vec![
                ("sasl", "oauthbearer"),
                ("username", "id"),
                ("password", "secret"),
                ("oauthTokenEndpointUri", "https://idp/token"),
                (
                    "oauthExtensions",
                    "logicalCluster=lkc-1,identityPoolId=pool-2",
                ),
            ],
            "parameter \"oauthExtensions\" is not supported by keda-rs",
        ),
    ] {
        let err = KafkaConfig::parse(&ctx(0, &metadata, &auth)).expect_err("unsupported");
        assert!(err.to_string().contains(needle), "{err}");
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}

#[test]
fn oauthbearer_takes_keda_parameters_for_both_token_providers() {
    // bearer (the default provider): client credentials, scopes split at commas.
    let c = KafkaConfig::parse(&ctx(
        0,
        &with(&[("sasl", "oauthbearer")]),
        &[
            ("username", "client"),
            ("password", "s3cret"),
            ("oauthTokenEndpointUri", "https://idp.example/token"),
            ("scopes", "a, b,,c"),
        ],
    ))
    .expect("ok");
    let Some(Sasl::OAuthBearer(TokenProvider::Bearer(bearer))) = c.cluster.sasl else {
        panic!("bearer expected");
    };
    assert_eq!(bearer.token_url.as_str(), "https://idp.example/token");
    assert_eq!(bearer.client_id, "client");
    assert_eq!(bearer.client_secret.expose(), "s3cret");
    assert_eq!(bearer.scopes, ["a", "b", "c"]);
    // aws_msk_iam: TLS, awsRegion (metadata) and AWS credentials.
    let c = KafkaConfig::parse(&ctx(
        0,
        &with(&[
            ("sasl", "oauthbearer"),
            ("saslTokenProvider", "aws_msk_iam"),
            ("tls", "enable"),
            ("awsRegion", "eu-west-1"),
        ]),
        &[("awsAccessKeyID", "AKID"), ("awsSecretAccessKey", "SECRET")],
    ))
    .expect("ok");
    let Some(Sasl::OAuthBearer(TokenProvider::MskIam { region, signer })) = c.cluster.sasl else {
        panic!("msk expected");
    };
    assert_eq!(region, "eu-west-1");
    let aws::client::Signer::Static(credentials) = signer else {
        panic!("static credentials expected");
    };
    assert_eq!(credentials.access_key_id, "AKID");
    assert_eq!(credentials.secret_access_key.expose(), "SECRET");

    for (metadata, auth, expected) in [
        (
            vec![("sasl", "oauthbearer")],
            vec![("password", "p"), ("oauthTokenEndpointUri", "https://i/t")],
            r#"trigger 0 (kafka): missing required parameter "username""#,
        ),
        (
            vec![("sasl", "oauthbearer")],
            vec![("username", "u"), ("oauthTokenEndpointUri", "https://i/t")],
            r#"trigger 0 (kafka): missing required parameter "password""#,
        ),
        (
            vec![("sasl", "oauthbearer")],
            vec![("username", "u"), ("password", "hunter2")],
            r#"trigger 0 (kafka): missing required parameter "oauthTokenEndpointUri""#,
        ),
        (
            vec![("sasl", "oauthbearer")],
            vec![
                ("username", "u"),
                ("password", "hunter2"),
                ("oauthTokenEndpointUri", "ftp://i/t"),
            ],
            r#"trigger 0 (kafka): parameter "oauthTokenEndpointUri" must be an http:// or https:// URL, not ftp:"#,
        ),
        (
            vec![("sasl", "oauthbearer")],
            vec![
                ("username", "u"),
                ("password", "hunter2"),
                ("oauthTokenEndpointUri", "https://i/t"),
                ("oauthExtensions", "a=b,c"),
            ],
            r#"trigger 0 (kafka): parameter "oauthExtensions": invalid OAuthBearer extension, must be of format key=value"#,
        ),
        (
            vec![("sasl", "oauthbearer"), ("saslTokenProvider", "iam")],
            vec![],
            r#"trigger 0 (kafka): parameter "saslTokenProvider": "iam" is not one of bearer, aws_msk_iam"#,
        ),
        (
            vec![
                ("sasl", "oauthbearer"),
                ("saslTokenProvider", "aws_msk_iam"),
                ("awsRegion", "eu-west-1"),
            ],
            vec![
                ("awsAccessKeyID", "AKID"),
                ("awsSecretAccessKey", "hunter2"),
            ],
            r#"trigger 0 (kafka): sasl "oauthbearer" with saslTokenProvider "aws_msk_iam" requires "tls": enable (TLS is required for AWS MSK authentication)"#,
        ),
        (
            vec![
                ("sasl", "oauthbearer"),
                ("saslTokenProvider", "aws_msk_iam"),
                ("tls", "enable"),
            ],
            vec![
                ("awsAccessKeyID", "AKID"),
                ("awsSecretAccessKey", "hunter2"),
            ],
            r#"trigger 0 (kafka): missing required parameter "awsRegion""#,
        ),
    ] {
        let err = KafkaConfig::parse(&ctx(0, &with(&metadata), &auth)).expect_err(expected);
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn secrets_from_trigger_authentication_never_reach_errors() {
    let err = KafkaConfig::parse(&ctx(
        0,
        &with(&[("tls", "enable")]),
        &[("key", "-----BEGIN PRIVATE KEY----- hunter2")],
    ))
    .expect_err("key without cert");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}
