use super::*;
use crate::context::test_context;

const CONNECTION_STRING: &str =
    "Endpoint=sb://keda.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=s3cretkey";

fn parse(metadata: &[(&str, &str)]) -> Result<ServiceBusConfig, String> {
    ServiceBusConfig::parse(&test_context(
        "azure-servicebus",
        0,
        metadata,
        &[],
        &[("connection", CONNECTION_STRING)],
    ))
    .map_err(|e| e.to_string())
}

/// (metadata, what the error names if any, metric name).
type Row<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>, &'a str);

#[test]
fn keda_s_metadata_cases() {
    // (metadata, error naming, metric name)
    let rows: &[Row<'_>] = &[
        (
            &[("queueName", "orders")],
            None,
            "s0-azure-servicebus-orders",
        ),
        (
            &[("topicName", "events"), ("subscriptionName", "billing")],
            None,
            "s0-azure-servicebus-events",
        ),
        (
            &[("queueName", "orders-.*"), ("useRegex", "true")],
            None,
            "s0-azure-servicebus-queue-regex",
        ),
        (
            &[
                ("topicName", "events"),
                ("subscriptionName", "bill.*"),
                ("useRegex", "true"),
                ("operation", "max"),
            ],
            None,
            "s0-azure-servicebus-topic-regex",
        ),
        (&[], Some("no service bus entity type set"), ""),
        (
            &[("queueName", "q"), ("subscriptionName", "s")],
            Some("subscription name provided with queue name"),
            "",
        ),
        (
            &[("queueName", "q"), ("topicName", "t")],
            Some("both topic and queue name metadata provided"),
            "",
        ),
        (
            &[("topicName", "t")],
            Some("no subscription name provided with topic name"),
            "",
        ),
        (
            &[("queueName", "(q"), ("useRegex", "true")],
            Some("queueName is not a valid regular expression"),
            "",
        ),
        (
            &[
                ("topicName", "t"),
                ("subscriptionName", "[s"),
                ("useRegex", "true"),
            ],
            Some("subscriptionName is not a valid regular expression"),
            "",
        ),
        (
            &[("queueName", "q"), ("messageCount", "x")],
            Some("\"messageCount\""),
            "",
        ),
        (
            &[("queueName", "q"), ("activationMessageCount", "1.5")],
            Some("\"activationMessageCount\""),
            "",
        ),
        (
            &[("queueName", "q"), ("operation", "min")],
            Some("\"operation\""),
            "",
        ),
        (
            &[("queueName", "q"), ("useRegex", "maybe")],
            Some("\"useRegex\""),
            "",
        ),
    ];
    for (i, (metadata, error, metric)) in rows.iter().enumerate() {
        match (parse(metadata), error) {
            (Ok(config), None) => assert_eq!(config.metric_name, *metric, "row {i}"),
            (Err(e), Some(name)) => assert!(e.contains(name), "row {i}: {e}"),
            (got, _) => panic!("row {i}: {:?}", got.map(|c| c.metric_name)),
        }
    }
    let config = parse(&[("queueName", "orders")]).unwrap();
    assert_eq!((config.target, config.activation), (5, 0));
    assert_eq!(config.operation, Operation::Sum);
}

#[test]
fn the_connection_comes_from_authentication_or_env_never_metadata() {
    let ctx = test_context(
        "azure-servicebus",
        2,
        &[("queueName", "q"), ("connection", CONNECTION_STRING)],
        &[],
        &[],
    );
    let err = ServiceBusConfig::parse(&ctx)
        .expect_err("metadata is not a source")
        .to_string();
    assert!(
        err.starts_with("trigger 2 (azure-servicebus): no connection setting given"),
        "{err}"
    );
    assert!(
        err.contains("Azure AD") && err.contains("not supported for azure-servicebus yet"),
        "{err}"
    );
    let ctx = test_context(
        "azure-servicebus",
        0,
        &[("queueName", "q"), ("connectionFromEnv", "SB")],
        &[("SB", CONNECTION_STRING)],
        &[],
    );
    assert!(ServiceBusConfig::parse(&ctx).is_ok());
    // An unusable string builds (KEDA reads it when it fetches) and every read names it.
    let ctx = test_context(
        "azure-servicebus",
        0,
        &[("queueName", "q")],
        &[],
        &[("connection", "Endpoint=sb://ns/;SharedAccessKey=s3cretkey")],
    );
    let config = ServiceBusConfig::parse(&ctx).expect("builds");
    let err = config.client_key().expect_err("unusable").to_string();
    assert!(
        err.contains("parameter \"connection\"") && err.contains("SharedAccessKeyName"),
        "{err}"
    );
    assert!(!err.contains("s3cretkey"), "{err}");
}

#[test]
fn requests_are_signed_for_the_namespace_url() {
    let config = parse(&[("topicName", "events/eu"), ("subscriptionName", "billing")]).unwrap();
    let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    let request = config.request(now).unwrap();
    assert_eq!(
        request.url.as_str(),
        "https://keda.servicebus.windows.net/events/eu/Subscriptions/billing?api-version=2021-05"
    );
    let auth = request
        .headers
        .get(AUTHORIZATION)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        auth,
        crate::azure::sas::token(request.url.as_str(), "Root", "s3cretkey", 1_700_003_600)
    );
    let regex = parse(&[("queueName", "o.*"), ("useRegex", "true")]).unwrap();
    let request = regex.page_request(200, now).unwrap();
    assert_eq!(
        request.url.as_str(),
        "https://keda.servicebus.windows.net/$Resources/Queues?api-version=2021-05&%24skip=200&%24top=100"
    );
}

#[test]
fn regexes_match_whole_names_and_operations_combine_as_keda() {
    let config = parse(&[("queueName", "orders-[0-9]+"), ("useRegex", "true")]).unwrap();
    let regex = config.regex.unwrap();
    assert!(regex.is_match("orders-12"));
    assert!(!regex.is_match("orders-12x"));
    assert!(!regex.is_match("xorders-1"));
    let alternation = whole_name_regex("a|ab").unwrap();
    assert!(alternation.is_match("ab"));
    assert_eq!(Operation::Sum.apply(&[3, 4, 5]), 12);
    assert_eq!(Operation::Max.apply(&[3, 9, 5]), 9);
    assert_eq!(Operation::Avg.apply(&[3, 4, 6]), 4);
    assert_eq!(Operation::Avg.apply(&[]), 0);
}
