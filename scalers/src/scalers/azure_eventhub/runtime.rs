//! The Event Hubs REST answers read for runtime information (ATOM entries of the Service Bus
//! namespace's management endpoint, Microsoft's "Event Hubs management REST" reference,
//! <https://learn.microsoft.com/rest/api/eventhub/get-event-hub> and
//! <https://learn.microsoft.com/rest/api/eventhub/get-partition>):
//! - `GET /<hub>`: an `<entry>` whose `EventHubDescription` lists `PartitionIds`;
//! - `GET /<hub>/consumergroups/<group>/partitions/<id>`: an `<entry>` whose
//!   `PartitionDescription` has `BeginSequenceNumber`, `EndSequenceNumber` (the last enqueued
//!   event's; -1 for an empty partition) and `LastEnqueuedOffset`.
//!
//! An entity that does not exist is answered with the empty feed titled `Publicly Listed
//! Services`.

/// The most partitions read (Event Hubs allows at most 2048 per hub, premium/dedicated).
pub const MAX_PARTITIONS: usize = 2048;

/// What a partition's description says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    /// `BeginSequenceNumber`.
    pub begin: i64,
    /// `EndSequenceNumber`: the last enqueued event's sequence number.
    pub end: i64,
}

fn document(body: &[u8]) -> Result<roxmltree::Document<'_>, String> {
    let text = std::str::from_utf8(body).map_err(|_| "a body that is not UTF-8".to_string())?;
    crate::remote::xml(text.trim_start_matches('\u{feff}').trim())
        .map_err(|e| crate::remote::xml_error(&e))
}

fn child<'a, 'input>(
    node: roxmltree::Node<'a, 'input>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'input>> {
    node.children().find(|n| n.has_tag_name(name))
}

/// The description element of an entry, `None` for the empty feed.
fn description<'a, 'input>(
    doc: &'a roxmltree::Document<'input>,
    name: &str,
) -> Result<Option<roxmltree::Node<'a, 'input>>, String> {
    let root = doc.root_element();
    if root.has_tag_name("feed")
        && !root.children().any(|n| n.has_tag_name("entry"))
        && child(root, "title")
            .and_then(|t| t.text())
            .is_some_and(|t| t.trim() == "Publicly Listed Services")
    {
        return Ok(None);
    }
    if !root.has_tag_name("entry") {
        return Err("another root element than <entry>".into());
    }
    child(root, "content")
        .and_then(|c| child(c, name))
        .map(Some)
        .ok_or_else(|| format!("an <entry> without a {name}"))
}

/// The partition IDs of an event hub's description, `None` when the hub does not exist.
///
/// # Errors
/// Not XML, another shape, no IDs, more than [`MAX_PARTITIONS`].
pub fn partition_ids(body: &[u8]) -> Result<Option<Vec<String>>, String> {
    let doc = document(body)?;
    let Some(hub) = description(&doc, "EventHubDescription")? else {
        return Ok(None);
    };
    let ids: Vec<String> = child(hub, "PartitionIds")
        .ok_or_else(|| "an EventHubDescription without PartitionIds".to_string())?
        .children()
        .filter(roxmltree::Node::is_element)
        .take(MAX_PARTITIONS + 1)
        .map(|n| n.text().unwrap_or_default().trim().to_string())
        .collect();
    if ids.is_empty() {
        return Err("an EventHubDescription without partitions".into());
    }
    if ids.len() > MAX_PARTITIONS {
        return Err(format!("more than {MAX_PARTITIONS} partitions"));
    }
    if ids.iter().any(|id| id.is_empty() || id.contains('/')) {
        return Err("a partition ID that is empty or holds '/'".into());
    }
    Ok(Some(ids))
}

/// A partition's sequence numbers, `None` when it does not exist.
///
/// # Errors
/// Not XML, another shape, missing or non-integer sequence numbers.
pub fn partition(body: &[u8]) -> Result<Option<Partition>, String> {
    let doc = document(body)?;
    let Some(partition) = description(&doc, "PartitionDescription")? else {
        return Ok(None);
    };
    let number = |name: &str| {
        child(partition, name)
            .and_then(|n| n.text())
            .and_then(|t| t.trim().parse::<i64>().ok())
            .ok_or_else(|| format!("a PartitionDescription without an integer {name}"))
    };
    Ok(Some(Partition {
        begin: number("BeginSequenceNumber")?,
        end: number("EndSequenceNumber")?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUB: &str = r#"<entry xmlns="http://www.w3.org/2005/Atom"><id>https://keda.servicebus.windows.net/hub</id><title type="text">hub</title><content type="application/xml"><EventHubDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><MessageRetentionInDays>1</MessageRetentionInDays><Status>Active</Status><PartitionCount>2</PartitionCount><PartitionIds xmlns:d2p1="http://schemas.microsoft.com/2003/10/Serialization/Arrays"><d2p1:string>0</d2p1:string><d2p1:string>1</d2p1:string></PartitionIds></EventHubDescription></content></entry>"#;
    const PARTITION: &str = r#"<entry xmlns="http://www.w3.org/2005/Atom"><title type="text">0</title><content type="application/xml"><PartitionDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><SizeInBytes>120</SizeInBytes><BeginSequenceNumber>3</BeginSequenceNumber><EndSequenceNumber>41</EndSequenceNumber><IncomingBytesPerSecond>0</IncomingBytesPerSecond><OutgoingBytesPerSecond>0</OutgoingBytesPerSecond><LastEnqueuedOffset>8800</LastEnqueuedOffset><LastEnqueuedTimeUtc>2026-11-20T10:00:00Z</LastEnqueuedTimeUtc></PartitionDescription></content></entry>"#;
    const EMPTY: &str = r#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Publicly Listed Services</title></feed>"#;

    #[test]
    fn descriptions_give_partitions_and_sequence_numbers() {
        assert_eq!(
            partition_ids(HUB.as_bytes()),
            Ok(Some(vec!["0".into(), "1".into()]))
        );
        assert_eq!(
            partition(PARTITION.as_bytes()),
            Ok(Some(Partition { begin: 3, end: 41 }))
        );
        assert_eq!(partition_ids(EMPTY.as_bytes()), Ok(None));
        assert_eq!(partition(EMPTY.as_bytes()), Ok(None));
        assert!(partition_ids(b"<entry/>").is_err());
        assert!(partition(PARTITION.replace(">41<", ">x<").as_bytes()).is_err());
        assert!(partition_ids(HUB.replace(">1<", ">a/b<").as_bytes()).is_err());
    }
}
