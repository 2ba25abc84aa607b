use super::*;

fn ctx(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
    ScalerContext {
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        auth_params: auth
            .iter()
            .map(|(k, v)| (k.to_string(), Secret::new(*v)))
            .collect(),
        ..ScalerContext::new("rabbitmq", 0)
    }
}

fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<RabbitMqConfig, String> {
    RabbitMqConfig::parse(&ctx(metadata, auth)).map_err(|e| e.to_string())
}

const AMQP: &str = "amqp://user:sekret@rabbit:5672/vhost";
const HTTP: &str = "http://user:sekret@rabbit:15672/";

#[test]
fn defaults_to_queue_length_twenty() {
    let c = parse(&[("host", AMQP), ("queueName", "q")], &[]).unwrap();
    assert_eq!((c.mode, c.value), (Mode::QueueLength, 20.0));
    assert_eq!(c.activation_value, 0.0);
    assert_eq!(c.protocol, Protocol::Amqp);
    assert_eq!(c.page_size, 100);
    assert_eq!(c.operation, Operation::Sum);
    assert_eq!(c.timeout, crate::context::DEFAULT_HTTP_TIMEOUT);
    assert_eq!(c.metric_name, "s0-rabbitmq-q");
}

#[test]
fn metric_names_escape_the_queue_name_as_keda_does() {
    // url.QueryEscape, then NormalizeString: "/" -> %2F -> -2F.
    for (queue, expected) in [
        ("sample", "s0-rabbitmq-sample"),
        ("namespace/name", "s0-rabbitmq-namespace-2Fname"),
        ("a b.c", "s0-rabbitmq-a+b-c"),
    ] {
        let c = parse(&[("host", HTTP), ("queueName", queue)], &[]).unwrap();
        assert_eq!(c.metric_name, expected, "{queue}");
    }
}

#[test]
fn protocol_follows_the_scheme_unless_given() {
    // (host, protocol, expected)
    for (host, protocol, expected) in [
        ("amqp://h", "", Protocol::Amqp),
        ("amqps://h", "", Protocol::Amqp),
        ("http://h", "", Protocol::Http),
        ("HTTPS://h", "", Protocol::Http),
        ("amqp://h", "http", Protocol::Http),
        ("http://h", "amqp", Protocol::Amqp),
    ] {
        let c = parse(
            &[("host", host), ("queueName", "q"), ("protocol", protocol)],
            &[],
        )
        .unwrap();
        assert_eq!(c.protocol, expected, "{host} {protocol}");
    }
}

#[test]
fn modes_values_and_the_deprecated_queue_length() {
    let c = parse(
        &[("host", HTTP), ("queueName", "q"), ("queueLength", "7")],
        &[],
    )
    .unwrap();
    assert_eq!((c.mode, c.value), (Mode::QueueLength, 7.0));
    let c = parse(
        &[
            ("host", HTTP),
            ("queueName", "q"),
            ("mode", "MessageRate"),
            ("value", "2.5"),
            ("activationValue", "1.5"),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(
        (c.mode, c.value, c.activation_value),
        (Mode::MessageRate, 2.5, 1.5)
    );
}

#[test]
fn invalid_combinations_fail_with_keda_messages() {
    // (metadata, auth params, expected message after the trigger prefix)
    type Row<'a> = (&'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], &'a str);
    let rows: &[Row<'_>] = &[
        (
            &[("queueName", "q")],
            &[],
            r#"missing required parameter "host""#,
        ),
        (
            &[("host", HTTP)],
            &[],
            r#"missing required parameter "queueName""#,
        ),
        (
            &[("host", "ftp://u:sekret@h"), ("queueName", "q")],
            &[],
            "unknown host URL scheme: `ftp`",
        ),
        (
            &[("host", HTTP), ("queueName", "q"), ("protocol", "kafka")],
            &[],
            r#"parameter "protocol": "kafka" is not one of auto, amqp, http"#,
        ),
        (
            &[
                ("host", HTTP),
                ("queueName", "q"),
                ("queueLength", "5"),
                ("mode", "QueueLength"),
            ],
            &[],
            "queueLength is deprecated; use mode and value",
        ),
        (
            &[
                ("host", HTTP),
                ("queueName", "q"),
                ("queueLength", "5"),
                ("value", "5"),
            ],
            &[],
            "queueLength is deprecated; use mode and value",
        ),
        (
            &[("host", HTTP), ("queueName", "q"), ("mode", "QueueLength")],
            &[],
            "value must be specified",
        ),
        (
            &[("host", HTTP), ("queueName", "q"), ("value", "5")],
            &[],
            "mode must be specified",
        ),
        (
            &[
                ("host", HTTP),
                ("queueName", "q"),
                ("mode", "Foo"),
                ("value", "5"),
            ],
            &[],
            "trigger mode Foo must be one of QueueLength, MessageRate, DeliverGetRate, PublishedToDeliveredRatio or ExpectedQueueConsumptionTime",
        ),
        (
            &[
                ("host", AMQP),
                ("queueName", "q"),
                ("mode", "MessageRate"),
                ("value", "5"),
            ],
            &[],
            "protocol amqp not supported; must be HTTP to use trigger mode MessageRate",
        ),
        (
            &[("host", AMQP), ("queueName", "q"), ("timeout", "10")],
            &[],
            "AMQP protocol doesn't support custom timeouts: 10ms",
        ),
        (
            &[("host", AMQP), ("queueName", "q"), ("useRegex", "true")],
            &[],
            "configure useRegex=true only with HTTP protocol",
        ),
        (
            &[
                ("host", AMQP),
                ("queueName", "q"),
                ("excludeUnacknowledged", "true"),
            ],
            &[],
            "configure excludeUnacknowledged=true only with HTTP protocol",
        ),
        (
            &[("host", HTTP), ("queueName", "q"), ("pageSize", "0")],
            &[],
            r#"parameter "pageSize" should be 1 or greater"#,
        ),
        (
            &[("host", HTTP), ("queueName", "q"), ("pageSize", "a")],
            &[],
            r#"parameter "pageSize": "a" is not a valid integer"#,
        ),
        (
            &[("host", HTTP), ("queueName", "q"), ("operation", "min")],
            &[],
            r#"parameter "operation": "min" is not one of sum, avg, max"#,
        ),
        (
            &[("host", HTTP), ("queueName", "q")],
            &[("username", "u")],
            "username and password must be given together",
        ),
        (
            &[("host", HTTP), ("queueName", "q")],
            &[("tls", "yes")],
            r#"parameter "tls": the value from TriggerAuthentication is not one of enable, disable"#,
        ),
        (
            &[("host", HTTP), ("queueName", "q")],
            &[("tls", "enable"), ("cert", "C")],
            r#"parameters "cert" and "key" must be given together"#,
        ),
        (
            &[("host", HTTP), ("queueName", "q")],
            &[("workloadIdentityResource", "r")],
            r#"parameter "workloadIdentityResource" is not supported"#,
        ),
        (
            &[("host", "http://rabbit:15672/"), ("queueName", "q")],
            &[("oauthTokenURI", "https://idp/token"), ("clientID", "c")],
            r#"OAuth2 requires tokenUrl clientId and clientSecret to be configured in TriggerAuthentication (spec.oauth2); missing parameter "clientSecret""#,
        ),
        (
            &[("host", "http://rabbit:15672/"), ("queueName", "q")],
            &[("clientSecret", "sekret")],
            r#"OAuth2 requires tokenUrl clientId and clientSecret to be configured in TriggerAuthentication (spec.oauth2); missing parameters "oauthTokenURI" and "clientID""#,
        ),
        (
            &[("host", "amqp://rabbit:5672/"), ("queueName", "q")],
            &[
                ("oauthTokenURI", "https://idp/token"),
                ("clientID", "c"),
                ("clientSecret", "sekret"),
            ],
            r#"parameter "oauthTokenURI": OAuth2 authentication is only supported with HTTP protocol, not AMQP"#,
        ),
        (
            &[
                ("host", "http://rabbit:15672/"),
                ("queueName", "q"),
                ("protocol", "amqp"),
            ],
            &[
                ("oauthTokenURI", "https://idp/token"),
                ("clientID", "c"),
                ("clientSecret", "sekret"),
            ],
            r#"parameter "oauthTokenURI": OAuth2 authentication is only supported with HTTP protocol, not AMQP"#,
        ),
        (
            &[("host", "http://rabbit:15672/"), ("queueName", "q")],
            &[
                ("oauthTokenURI", "https://idp/token"),
                ("clientID", "c"),
                ("clientSecret", "sekret"),
                ("username", "u"),
                ("password", "sekret"),
            ],
            "OAuth2 authentication cannot be combined with username/password authentication",
        ),
        (
            &[("host", "http://rabbit:15672/"), ("queueName", "q")],
            &[
                ("oauthTokenURI", "ftp://idp/token"),
                ("clientID", "c"),
                ("clientSecret", "sekret"),
            ],
            r#"parameter "oauthTokenURI": the value from TriggerAuthentication is not an http or https URL"#,
        ),
        (
            &[("host", "http://rabbit:15672/"), ("queueName", "q")],
            &[
                ("oauthTokenURI", "https://idp/token"),
                ("clientID", "c"),
                ("clientSecret", "sekret"),
                ("scopes", "a,b"),
                ("endpointParams", "scope=sekret"),
            ],
            r#"parameter "endpointParams" cannot set "scope" when "scopes" is given"#,
        ),
    ];
    for (metadata, auth, expected) in rows {
        let err = parse(metadata, auth).unwrap_err();
        assert!(
            err.starts_with(&format!("trigger 0 (rabbitmq): {expected}")),
            "expected {expected:?}, got {err:?}"
        );
        assert!(!err.contains("sekret"), "{err}");
    }
}

#[test]
fn host_and_credentials_come_from_auth_and_env() {
    let c = RabbitMqConfig::parse(&ScalerContext {
        metadata: [
            ("hostFromEnv", "RABBIT"),
            ("queueName", "q"),
            ("usernameFromEnv", "U"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        resolved_env: [("RABBIT", HTTP), ("U", "env-user")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        auth_params: [("password", Secret::new("pw"))]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        ..ScalerContext::new("rabbitmq", 0)
    })
    .unwrap();
    assert_eq!(c.host.expose(), HTTP);
    let (user, password) = c.credentials.as_ref().unwrap();
    assert_eq!((user.as_str(), password.expose()), ("env-user", "pw"));
    assert!(!format!("{c:?}").contains("sekret"));
}

#[test]
fn oauth2_parameters_make_the_client_credentials_settings() {
    let c = parse(
        &[("host", "https://rabbit:15671/vh"), ("queueName", "q")],
        &[
            ("oauthTokenURI", "https://idp.example/oauth/token"),
            ("clientID", "keda"),
            ("clientSecret", "sekret"),
            ("scopes", " rabbitmq.read:*/* , rabbitmq.tag:monitoring,"),
            (
                "endpointParams",
                "audience=rabbit+mq&resource=api%3A%2F%2Fr",
            ),
        ],
    )
    .unwrap();
    let o = c.oauth2.as_ref().expect("oauth2");
    assert_eq!(o.token_url.as_str(), "https://idp.example/oauth/token");
    assert_eq!(o.client_id, "keda");
    assert_eq!(o.client_secret.expose(), "sekret");
    assert_eq!(o.scopes, ["rabbitmq.read:*/*", "rabbitmq.tag:monitoring"]);
    let params: Vec<(&str, &str)> = o
        .endpoint_params
        .iter()
        .map(|(k, v)| (k.as_str(), v.expose()))
        .collect();
    assert_eq!(params, [("audience", "rabbit mq"), ("resource", "api://r")]);
    assert!(!format!("{c:?}").contains("sekret"));
    // Without the parameters: no OAuth2.
    let c = parse(&[("host", HTTP), ("queueName", "q")], &[]).unwrap();
    assert_eq!(c.oauth2, None);
}

#[test]
fn timeout_is_a_go_duration_or_milliseconds_as_in_keda() {
    for (raw, millis) in [
        ("5s", 5_000),
        ("1m30s", 90_000),
        ("250ms", 250),
        ("+2s", 2_000),
        ("1500", 1_500),
    ] {
        let c = parse(
            &[("host", "https://h"), ("queueName", "q"), ("timeout", raw)],
            &[],
        )
        .unwrap_or_else(|e| panic!("{raw}: {e}"));
        assert_eq!(c.timeout, Duration::from_millis(millis), "{raw}");
    }
    for raw in ["-5s", "-1", "1.5", "5 seconds", "2h"] {
        let err = parse(
            &[("host", "https://h"), ("queueName", "q"), ("timeout", raw)],
            &[],
        )
        .unwrap_err();
        assert!(err.contains("parameter \"timeout\""), "{raw}: {err}");
    }
    let err = parse(
        &[("host", AMQP), ("queueName", "q"), ("timeout", "5s")],
        &[],
    )
    .unwrap_err();
    assert!(
        err.contains("AMQP protocol doesn't support custom timeouts: 5s"),
        "{err}"
    );
}

#[test]
fn tls_material_is_used_only_when_enabled_and_timeout_overrides_the_default() {
    let c = parse(
        &[
            ("host", "https://h"),
            ("queueName", "q"),
            ("timeout", "1500"),
            ("unsafeSsl", "true"),
        ],
        &[("ca", "CA"), ("cert", "C"), ("key", "K")],
    )
    .unwrap();
    assert_eq!(c.tls.ca, None);
    assert!(c.tls.insecure);
    assert_eq!(c.timeout, Duration::from_millis(1500));
    let c = parse(
        &[("host", "https://h"), ("queueName", "q")],
        &[("tls", "enable"), ("ca", "CA"), ("cert", "C"), ("key", "K")],
    )
    .unwrap();
    assert_eq!(c.tls.ca.as_ref().map(Secret::expose), Some("CA"));
    assert!(c.tls.client.is_some());
}
