use super::*;
use crate::context::test_context;

const HUB_CONNECTION: &str = "Endpoint=sb://keda.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=s3cretkey;EntityPath=telemetry";
const NAMESPACE_CONNECTION: &str =
    "Endpoint=sb://keda.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=s3cretkey";

fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<EventHubConfig, String> {
    EventHubConfig::parse(&test_context("azure-eventhub", 0, metadata, &[], auth))
        .map_err(|e| e.to_string())
}

const AUTH: &[(&str, &str)] = &[
    ("connection", HUB_CONNECTION),
    ("storageConnection", "UseDevelopmentStorage=true"),
];

/// (metadata, TriggerAuthentication parameters, error).
type Row<'a> = (&'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], &'a str);

#[test]
fn keda_s_metadata_cases() {
    let config = parse(&[], AUTH).unwrap();
    assert_eq!(config.metric_name, "s0-azure-eventhub-$Default");
    assert_eq!(
        (config.threshold, config.activation, config.stale),
        (64, 0, 10000)
    );
    assert_eq!(config.hub, "telemetry");
    assert_eq!(config.strategy, Strategy::AzureFunction);
    let config = parse(
        &[
            ("consumerGroup", "cg"),
            ("blobContainer", "checkpoints"),
            ("checkpointStrategy", "goSdk"),
        ],
        AUTH,
    )
    .unwrap();
    assert_eq!(config.metric_name, "s0-azure-eventhub-cg");
    assert_eq!(config.strategy, Strategy::GoSdk);
    let without_path = [
        ("connection", NAMESPACE_CONNECTION),
        ("storageConnection", "UseDevelopmentStorage=true"),
    ];
    assert_eq!(
        parse(&[("eventHubName", "hub2")], &without_path)
            .unwrap()
            .hub,
        "hub2"
    );
    // (metadata, auth, error)
    let rows: &[Row<'_>] = &[
        (
            &[],
            &without_path,
            "connection string does not contain event hub name, and parameter eventHubName not provided",
        ),
        (
            &[("unprocessedEventThreshold", "0")],
            AUTH,
            "\"unprocessedEventThreshold\" must be a positive number",
        ),
        (
            &[("unprocessedEventThreshold", "x")],
            AUTH,
            "parameter \"unprocessedEventThreshold\"",
        ),
        (
            &[("stalePartitionInfoThreshold", "1.5")],
            AUTH,
            "parameter \"stalePartitionInfoThreshold\"",
        ),
        (
            &[],
            &[("connection", HUB_CONNECTION)],
            "no storage connection string given",
        ),
        (
            &[],
            &[("storageConnection", "UseDevelopmentStorage=true")],
            "no event hub connection string given",
        ),
        (
            &[],
            &[
                ("connection", "Endpoint=sb://ns/;SharedAccessKey=s3cretkey"),
                ("storageConnection", "UseDevelopmentStorage=true"),
            ],
            "parameter \"connection\"",
        ),
        (
            &[],
            &[
                ("connection", HUB_CONNECTION),
                ("storageConnection", "AccountName=a"),
            ],
            "parameter \"storageConnection\"",
        ),
    ];
    for (i, (metadata, auth, error)) in rows.iter().enumerate() {
        let err = parse(metadata, auth).expect_err("invalid");
        assert!(err.contains(error), "row {i}: {err}");
        assert!(!err.contains("s3cretkey"), "row {i}: {err}");
    }
    let err = parse(&[], &[]).expect_err("no auth");
    assert!(
        err.contains("not supported for azure-eventhub yet"),
        "{err}"
    );
}

#[test]
fn unprocessed_events_are_counted_as_keda_counts_them() {
    let p = |begin, end| Partition { begin, end };
    // (partition, checkpoint, stale threshold, count)
    let rows = [
        (p(0, -1), Some(5), 10000, 0),
        (p(0, -1), None, 10000, 0),
        (p(0, 0), None, 10000, 1),
        (p(3, 3), None, 10000, 0),
        (p(3, 10), None, 10000, 8),
        (p(0, 10), Some(4), 10000, 6),
        (p(0, 10), Some(10), 10000, 0),
        // Wrapped around: (MAX - 15) + 10.
        (p(0, 10), Some(15), 0, i64::MAX - 5),
        // ... which is stale information with the default threshold.
        (p(0, 10), Some(15), 10000, 0),
    ];
    for (i, (partition, checkpoint, stale, count)) in rows.into_iter().enumerate() {
        assert_eq!(unprocessed(partition, checkpoint, stale), count, "row {i}");
    }
    assert_eq!(lag_for_partitions(1000, 4, 64), 256);
    assert_eq!(lag_for_partitions(200, 4, 64), 200);
}
