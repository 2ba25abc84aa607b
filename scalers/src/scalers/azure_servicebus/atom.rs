//! The ATOM answers of the Service Bus management API
//! (<https://learn.microsoft.com/rest/api/servicebus/get-entity>, "Queues, topics and
//! subscriptions" of the Service Bus REST reference): one `<entry>` whose `<content>` holds a
//! `QueueDescription` or `SubscriptionDescription` with
//! `<CountDetails><d2p1:ActiveMessageCount>`, a `<feed>` of such entries when listing, and the
//! empty feed titled `Publicly Listed Services` that Service Bus answers (with 200) for an
//! entity that does not exist.

/// The largest answer element count read from one page: Service Bus pages hold at most 100.
pub const MAX_ENTRIES: usize = 5000;

/// One entity of an answer: its name (the entry's `<title>`) and active message count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entity {
    /// The queue's or subscription's name.
    pub name: String,
    /// `CountDetails/ActiveMessageCount`.
    pub active: i64,
}

fn parse(body: &[u8]) -> Result<roxmltree::Document<'_>, String> {
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

fn is_empty_feed(root: roxmltree::Node<'_, '_>) -> bool {
    root.has_tag_name("feed")
        && !root.children().any(|n| n.has_tag_name("entry"))
        && child(root, "title")
            .and_then(|t| t.text())
            .is_some_and(|t| t.trim() == "Publicly Listed Services")
}

/// The entity of one `<entry>`.
fn entry(node: roxmltree::Node<'_, '_>) -> Result<Entity, String> {
    let name = child(node, "title")
        .and_then(|t| t.text())
        .map(str::trim)
        .unwrap_or_default()
        .to_string();
    let description = child(node, "content")
        .and_then(|c| c.children().find(roxmltree::Node::is_element))
        .ok_or_else(|| "an <entry> without a description in its <content>".to_string())?;
    let text = child(description, "CountDetails")
        .and_then(|c| child(c, "ActiveMessageCount"))
        .and_then(|n| n.text())
        .ok_or_else(|| "an <entry> without CountDetails/ActiveMessageCount".to_string())?;
    let active = text
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(|| "an ActiveMessageCount that is not a non-negative integer".to_string())?;
    Ok(Entity { name, active })
}

/// The entity of a Get Entity answer, or `None` when Service Bus says it does not exist (its
/// empty feed).
///
/// # Errors
/// Not XML, another shape, or no usable `ActiveMessageCount`.
pub fn entity(body: &[u8]) -> Result<Option<Entity>, String> {
    let doc = parse(body)?;
    let root = doc.root_element();
    if is_empty_feed(root) {
        return Ok(None);
    }
    if !root.has_tag_name("entry") {
        return Err("another root element than <entry>".into());
    }
    entry(root).map(Some)
}

/// The entities of a page of a List answer (a `<feed>`; the empty feed is an empty page).
///
/// # Errors
/// Not XML, another shape, more than [`MAX_ENTRIES`] entries, an entry without a usable
/// `ActiveMessageCount`.
pub fn feed(body: &[u8]) -> Result<Vec<Entity>, String> {
    let doc = parse(body)?;
    let root = doc.root_element();
    if !root.has_tag_name("feed") {
        return Err("another root element than <feed>".into());
    }
    let entries: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("entry"))
        .take(MAX_ENTRIES + 1)
        .collect();
    if entries.len() > MAX_ENTRIES {
        return Err(format!("more than {MAX_ENTRIES} entries in one page"));
    }
    entries.into_iter().map(entry).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Get Queue answer as Service Bus sends it (the shape of Microsoft's REST reference).
    const QUEUE: &str = r#"<entry xml:base="https://keda.servicebus.windows.net/orders?api-version=2021-05" xmlns="http://www.w3.org/2005/Atom"><id>https://keda.servicebus.windows.net/orders?api-version=2021-05</id><title type="text">orders</title><published>2026-11-20T10:00:00Z</published><updated>2026-11-20T10:00:00Z</updated><author><name>keda</name></author><link rel="self" href="https://keda.servicebus.windows.net/orders?api-version=2021-05"/><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><LockDuration>PT1M</LockDuration><MaxSizeInMegabytes>1024</MaxSizeInMegabytes><MessageCount>9</MessageCount><CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>7</d2p1:ActiveMessageCount><d2p1:DeadLetterMessageCount>2</d2p1:DeadLetterMessageCount><d2p1:ScheduledMessageCount>0</d2p1:ScheduledMessageCount><d2p1:TransferMessageCount>0</d2p1:TransferMessageCount><d2p1:TransferDeadLetterMessageCount>0</d2p1:TransferDeadLetterMessageCount></CountDetails><Status>Active</Status></QueueDescription></content></entry>"#;

    #[test]
    fn an_entry_gives_the_active_count_and_the_empty_feed_means_no_entity() {
        assert_eq!(
            entity(QUEUE.as_bytes()),
            Ok(Some(Entity {
                name: "orders".into(),
                active: 7
            }))
        );
        let empty = r#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Publicly Listed Services</title><subtitle type="text">This is the list of publicly-listed services currently available.</subtitle><id>uuid:1</id><updated>2026-11-20T10:00:00Z</updated><generator>Service Bus 1.1</generator></feed>"#;
        assert_eq!(entity(empty.as_bytes()), Ok(None));
        assert_eq!(feed(empty.as_bytes()), Ok(vec![]));
        let list = format!(
            r#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Queues</title>{QUEUE}{}</feed>"#,
            QUEUE
                .replace(">orders<", ">orders-2<")
                .replace(">7<", ">3<")
        );
        assert_eq!(
            feed(list.as_bytes()).map(|e| e.iter().map(|e| e.active).sum::<i64>()),
            Ok(10)
        );
        for bad in [
            "not xml",
            "<Error><Code>401</Code></Error>",
            r#"<entry xmlns="http://www.w3.org/2005/Atom"><title>q</title></entry>"#,
            &QUEUE.replace(">7<", ">-7<"),
            &QUEUE.replace(">7<", ">lots<"),
        ] {
            assert!(entity(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
