//! Where each of KEDA's `checkpointStrategy` values keeps a partition's checkpoint in blob
//! storage, and how it reads the blob (`pkg/scalers/azure/azure_eventhub_checkpoint.go`):
//!
//! | strategy | container | blob | sequence number |
//! |---|---|---|---|
//! | `azureFunction` (also: no `blobContainer`) | `azure-webjobs-eventhub` | `<namespace host>/<hub>/<consumerGroup>/<partition>` | JSON `SequenceNumber` |
//! | `blobMetadata` | `blobContainer` | `<namespace host>/<hub>/<consumerGroup, lower-cased>/checkpoint/<partition>` | metadata `sequencenumber` |
//! | `goSdk` | `blobContainer` | `<partition>` | JSON `checkpoint.sequenceNumber` |
//! | `dapr` | `blobContainer` | `dapr-<hub>-<consumerGroup>-<partition>` | JSON `checkpoint.sequenceNumber` |
//! | anything else, with `blobContainer` | `blobContainer` | `<consumerGroup>/<partition>` | JSON `SequenceNumber`, else `sequence_number` (the old Python SDK's) |
//!
//! JSON keys are matched without regard to case, as Go's `encoding/json` matches them.

/// The container of the `azureFunction` strategy.
pub const AZURE_FUNCTION_CONTAINER: &str = "azure-webjobs-eventhub";

/// A checkpoint strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Azure Functions' checkpoints.
    AzureFunction,
    /// The checkpoint in the blob's metadata (the .NET and Java SDKs' processors).
    BlobMetadata,
    /// The Go SDK's processor.
    GoSdk,
    /// Dapr's Event Hubs binding and pub/sub.
    Dapr,
    /// KEDA's default with a `blobContainer`: `<consumerGroup>/<partition>`.
    Default,
}

impl Strategy {
    /// KEDA's `newCheckpointer`: the strategy of `checkpointStrategy` (as written) and
    /// `blobContainer`.
    pub fn of(strategy: Option<&str>, container: Option<&str>) -> Self {
        match strategy {
            Some("goSdk") => Self::GoSdk,
            Some("dapr") => Self::Dapr,
            Some("blobMetadata") => Self::BlobMetadata,
            Some("azureFunction") => Self::AzureFunction,
            _ if container.is_none() => Self::AzureFunction,
            _ => Self::Default,
        }
    }

    /// The container and blob name of `partition`'s checkpoint.
    pub fn location(
        self,
        container: &str,
        namespace: &str,
        hub: &str,
        consumer_group: &str,
        partition: &str,
    ) -> (String, String) {
        match self {
            Self::AzureFunction => (
                AZURE_FUNCTION_CONTAINER.into(),
                format!("{namespace}/{hub}/{consumer_group}/{partition}"),
            ),
            Self::BlobMetadata => (
                container.into(),
                format!(
                    "{namespace}/{hub}/{}/checkpoint/{partition}",
                    consumer_group.to_lowercase()
                ),
            ),
            Self::GoSdk => (container.into(), partition.into()),
            Self::Dapr => (
                container.into(),
                format!("dapr-{hub}-{consumer_group}-{partition}"),
            ),
            Self::Default => (container.into(), format!("{consumer_group}/{partition}")),
        }
    }
}

/// The value of `key` (compared without regard to case) in JSON object `object`.
fn field<'a>(object: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    object
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
}

/// An integer JSON value as Go reads it into an `int64`: absent or `null` is 0.
fn int64(value: Option<&serde_json::Value>, name: &str) -> Result<i64, String> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(0),
        Some(v) => v
            .as_i64()
            .ok_or_else(|| format!("a checkpoint whose {name} is not a 64-bit integer")),
    }
}

/// The sequence number of a checkpoint blob's body for `strategy` (not `BlobMetadata`).
///
/// # Errors
/// The body is not JSON, or the sequence number is not a 64-bit integer.
pub fn sequence_number(strategy: Strategy, body: &[u8]) -> Result<i64, String> {
    let json: serde_json::Value =
        crate::remote::from_json(body).map_err(|e| format!("a checkpoint blob that is {e}"))?;
    match strategy {
        Strategy::GoSdk | Strategy::Dapr => int64(
            field(&json, "checkpoint").and_then(|c| field(c, "sequenceNumber")),
            "checkpoint.sequenceNumber",
        ),
        Strategy::Default => {
            let number = int64(field(&json, "SequenceNumber"), "SequenceNumber")?;
            if number != 0 {
                return Ok(number);
            }
            // mergo.Merge: a zero SequenceNumber takes the Python SDK's field.
            int64(field(&json, "sequence_number"), "sequence_number")
        }
        Strategy::AzureFunction | Strategy::BlobMetadata => {
            int64(field(&json, "SequenceNumber"), "SequenceNumber")
        }
    }
}

/// The sequence number of a `blobMetadata` checkpoint: its `sequencenumber` metadata value.
///
/// # Errors
/// Absent, or not a 64-bit integer.
pub fn metadata_sequence_number(value: Option<&str>) -> Result<i64, String> {
    let value = value.ok_or_else(|| "sequencenumber on blob not found".to_string())?;
    value
        .parse::<i64>()
        .map_err(|_| "sequencenumber is not a valid int64 value".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_follow_keda_per_strategy() {
        let rows = [
            (
                Strategy::of(None, None),
                "azure-webjobs-eventhub",
                "ns.servicebus.windows.net/hub/$Default/0",
            ),
            (
                Strategy::of(Some("azureFunction"), Some("c")),
                "azure-webjobs-eventhub",
                "ns.servicebus.windows.net/hub/$Default/0",
            ),
            (
                Strategy::of(Some("blobMetadata"), Some("c")),
                "c",
                "ns.servicebus.windows.net/hub/$default/checkpoint/0",
            ),
            (Strategy::of(Some("goSdk"), Some("c")), "c", "0"),
            (
                Strategy::of(Some("dapr"), Some("c")),
                "c",
                "dapr-hub-$Default-0",
            ),
            (Strategy::of(None, Some("c")), "c", "$Default/0"),
            (Strategy::of(Some("other"), Some("c")), "c", "$Default/0"),
        ];
        for (strategy, container, blob) in rows {
            assert_eq!(
                strategy.location("c", "ns.servicebus.windows.net", "hub", "$Default", "0"),
                (container.to_string(), blob.to_string()),
                "{strategy:?}"
            );
        }
    }

    #[test]
    fn bodies_give_the_sequence_number_as_go_decodes_them() {
        let rows: &[(Strategy, &str, Result<i64, ()>)] = &[
            (
                Strategy::AzureFunction,
                r#"{"Offset":"1","SequenceNumber":42,"PartitionId":"0"}"#,
                Ok(42),
            ),
            (Strategy::AzureFunction, r#"{"sequencenumber":7}"#, Ok(7)),
            (
                Strategy::GoSdk,
                r#"{"checkpoint":{"offset":"1","sequenceNumber":9},"partitionId":"0"}"#,
                Ok(9),
            ),
            (
                Strategy::Dapr,
                r#"{"partitionID":"0","checkpoint":{"sequenceNumber":3}}"#,
                Ok(3),
            ),
            (Strategy::Default, r#"{"SequenceNumber":5}"#, Ok(5)),
            (
                Strategy::Default,
                r#"{"partition_id":"0","sequence_number":6}"#,
                Ok(6),
            ),
            (Strategy::Default, r#"{}"#, Ok(0)),
            (
                Strategy::GoSdk,
                r#"{"checkpoint":{"sequenceNumber":"9"}}"#,
                Err(()),
            ),
            (Strategy::Default, "not json", Err(())),
        ];
        for (strategy, body, expected) in rows {
            assert_eq!(
                sequence_number(*strategy, body.as_bytes()).map_err(drop),
                *expected,
                "{strategy:?} {body}"
            );
        }
        assert_eq!(metadata_sequence_number(Some("12")), Ok(12));
        assert!(metadata_sequence_number(None).is_err());
        assert!(metadata_sequence_number(Some("x")).is_err());
    }
}
