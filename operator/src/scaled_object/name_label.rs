//! The `scaledobject.keda.sh/name` label as the watch cache keeps it.
//!
//! The operator gives every ScaledObject this label (KEDA does the same), and on most objects it
//! is the only one. Kept as the API server sends it, it costs every cached object a B-tree node
//! of eleven entries (about 540 bytes) and two strings: about 60 MB at 100,000 objects, for one
//! fact the name already says. So the watch stores an object whose only label is its own name
//! label with an empty, unallocated label map instead ([`compact`]); the API server never sends
//! an empty map (Kubernetes omits it), so the empty map means "only the name label" and nothing
//! else. Everything that reads a cached ScaledObject's labels reads them through [`labels`],
//! which gives them back as the API server has them.

use std::borrow::Cow;
use std::collections::BTreeMap;

use keda_api::ScaledObject;
use keda_api::annotations::SCALED_OBJECT_NAME_LABEL;

/// Replaces the labels of `so` by an empty map when its only label is its own name label, as
/// the watch cache keeps it. An empty map sent by a server (which Kubernetes never does) is
/// taken as no labels, so that it cannot read as the name label.
pub(crate) fn compact(so: &mut ScaledObject) {
    let meta = &mut so.metadata;
    let Some(labels) = meta.labels.as_mut() else {
        return;
    };
    if labels.is_empty() {
        meta.labels = None;
        return;
    }
    let only_own = labels.len() == 1
        && meta
            .name
            .as_ref()
            .is_some_and(|name| labels.get(SCALED_OBJECT_NAME_LABEL) == Some(name));
    if only_own {
        // `BTreeMap::new` allocates nothing; the node and the two strings are freed.
        *labels = BTreeMap::new();
    }
}

/// The labels of `so` as the API server has them, whether `so` came from the watch cache
/// ([`compact`]ed) or from an API answer.
pub(crate) fn labels(so: &ScaledObject) -> Cow<'_, BTreeMap<String, String>> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    match &so.metadata.labels {
        None => Cow::Borrowed(&NONE),
        Some(labels) if labels.is_empty() => Cow::Owned(BTreeMap::from([(
            SCALED_OBJECT_NAME_LABEL.to_string(),
            so.metadata.name.clone().unwrap_or_default(),
        )])),
        Some(labels) => Cow::Borrowed(labels),
    }
}

/// Whether `so` carries the name label with its own name.
pub(crate) fn has_own(so: &ScaledObject) -> bool {
    match &so.metadata.labels {
        None => false,
        Some(labels) if labels.is_empty() => so.metadata.name.is_some(),
        Some(labels) => {
            so.metadata.name.is_some()
                && labels.get(SCALED_OBJECT_NAME_LABEL) == so.metadata.name.as_ref()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn so(name: &str, labels: Option<&[(&str, &str)]>) -> ScaledObject {
        let mut so = ScaledObject::new(name, Default::default());
        so.metadata = ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: labels.map(|l| {
                l.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            ..ObjectMeta::default()
        };
        so
    }

    #[test]
    fn an_object_whose_only_label_is_its_name_reads_the_same_after_compaction() {
        let server = so("web", Some(&[(SCALED_OBJECT_NAME_LABEL, "web")]));
        let mut cached = server.clone();
        compact(&mut cached);
        assert_eq!(cached.metadata.labels, Some(BTreeMap::new()));
        assert_eq!(labels(&cached), labels(&server));
        assert_eq!(
            *labels(&cached),
            server.metadata.labels.clone().expect("labels")
        );
        assert!(has_own(&cached) && has_own(&server));
    }

    #[test]
    fn other_labels_a_wrong_name_or_none_are_kept_as_they_are() {
        let rows: [Option<&[(&str, &str)]>; 4] = [
            None,
            Some(&[(SCALED_OBJECT_NAME_LABEL, "other")]),
            Some(&[(SCALED_OBJECT_NAME_LABEL, "web"), ("team", "a")]),
            Some(&[("team", "a")]),
        ];
        for row in rows {
            let server = so("web", row);
            let mut cached = server.clone();
            compact(&mut cached);
            assert_eq!(cached.metadata.labels, server.metadata.labels, "{row:?}");
            assert_eq!(
                *labels(&cached),
                server.metadata.labels.clone().unwrap_or_default(),
                "{row:?}"
            );
        }
        assert!(!has_own(&so("web", None)));
        assert!(!has_own(&so(
            "web",
            Some(&[(SCALED_OBJECT_NAME_LABEL, "other")])
        )));
        assert!(has_own(&so(
            "web",
            Some(&[(SCALED_OBJECT_NAME_LABEL, "web"), ("team", "a")])
        )));
        assert!(!has_own(&so("web", Some(&[("team", "a")]))));
    }

    #[test]
    fn an_empty_map_from_a_server_is_no_label() {
        let mut cached = so("web", Some(&[]));
        compact(&mut cached);
        assert_eq!(cached.metadata.labels, None);
        assert!(!has_own(&cached));
        assert!(labels(&cached).is_empty());
    }
}
