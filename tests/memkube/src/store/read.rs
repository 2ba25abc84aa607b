//! Reads: lists (label and field selectors, limit and continue tokens) and watches (resume
//! from the bounded history, bookmarks).

use super::*;

impl State {
    /// Lists matching objects; returns the items, the continue token and the list's resourceVersion.
    pub(crate) fn list(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        query: &ListQuery,
    ) -> Result<ListPage, ApiError> {
        let gr = def.group_resource();
        let data = self.resources.get(&gr);
        let compacted = data.map_or(0, |d| d.compacted_rv);
        let (list_rv, start) = match &query.continue_token {
            Some(token) => {
                let (rv, ns, name) = decode_continue(token)?;
                if rv < compacted {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                    ));
                }
                (rv, Some((ns, name)))
            }
            None => (self.rv, None),
        };
        let Some(data) = data else {
            return Ok((Vec::new(), None, list_rv));
        };
        let namespace = namespace.filter(|_| def.namespaced);
        let matches = |obj: &Value| query.labels.matches(obj) && query.fields.matches(obj);

        if let Some(name) = query.fields.pinned_name() {
            let items: Vec<Arc<Value>> = match namespace {
                Some(ns) => data
                    .objects
                    .get(&(ns.to_string(), name.to_string()))
                    .into_iter()
                    .cloned()
                    .collect(),
                None => data
                    .objects
                    .values()
                    .filter(|o| meta_str(o, "name") == Some(name))
                    .cloned()
                    .collect(),
            };
            let items: Vec<_> = items
                .into_iter()
                .filter(|o: &Arc<Value>| matches(o))
                .collect();
            return Ok((items, None, list_rv));
        }

        use std::ops::Bound;
        let lower = match (&start, namespace) {
            (Some(key), _) => Bound::Excluded(key.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let limit = query.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut token = None;
        for ((ns, name), obj) in data.objects.range((lower, Bound::Unbounded)) {
            if namespace.is_some_and(|want| want != ns) {
                break;
            }
            if !matches(obj) {
                continue;
            }
            if items.len() == limit {
                // One more match exists beyond the page: hand out a token for the last item.
                let (last_ns, last_name) = items
                    .last()
                    .map(|o: &Arc<Value>| {
                        (
                            meta_str(o, "namespace").unwrap_or_default().to_string(),
                            meta_str(o, "name").unwrap_or_default().to_string(),
                        )
                    })
                    .unwrap_or_else(|| (ns.clone(), name.clone()));
                token = Some(encode_continue(list_rv, &last_ns, &last_name));
                break;
            }
            items.push(obj.clone());
        }
        Ok((items, token, list_rv))
    }

    /// Starts a watch: the initial state or the retained changes after `resource_version`, and
    /// a channel for what follows. Nothing can be missed between the two: both happen under
    /// the same lock.
    pub(crate) fn watch(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        resource_version: Option<&str>,
        send_initial_events: bool,
    ) -> Result<WatchStart, ApiError> {
        let gr = def.group_resource();
        let namespace = namespace.filter(|_| def.namespaced).map(str::to_string);
        let current = self.rv;
        let requested =
            match resource_version.filter(|rv| !rv.is_empty() && *rv != "0") {
                None => None,
                Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version: {rv:?}"))
                })?),
            };
        let data = self.data(&gr);
        let mut start = WatchStart {
            initial: Vec::new(),
            replay: Vec::new(),
            start_rv: current,
            rx: mpsc::unbounded_channel().1,
        };
        match requested {
            Some(rv) if !send_initial_events => {
                if rv < data.compacted_rv {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {rv} ({})",
                        data.compacted_rv
                    )));
                }
                start.replay = data
                    .history
                    .iter()
                    .filter(|c| c.rv > rv && namespace.as_ref().is_none_or(|ns| *ns == c.namespace))
                    .cloned()
                    .collect();
                start.start_rv = rv.max(data.compacted_rv);
            }
            _ => {
                start.initial = match &namespace {
                    Some(ns) => data
                        .objects
                        .range((ns.clone(), String::new())..)
                        .take_while(|((n, _), _)| n == ns)
                        .map(|(_, o)| o.clone())
                        .collect(),
                    None => data.objects.values().cloned().collect(),
                };
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        data.watchers.push(WatchSink { tx, namespace });
        start.rx = rx;
        Ok(start)
    }
}

pub(super) fn encode_continue(rv: u64, namespace: &str, name: &str) -> String {
    format!("{rv}.{}", hex(&format!("{namespace}/{name}")))
}

pub(super) fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let bad = || ApiError::bad_request(format!("invalid continue token: {token:?}"));
    let (rv, key) = token.split_once('.').ok_or_else(bad)?;
    let rv = rv.parse().map_err(|_| bad())?;
    if key.len() % 2 != 0 {
        return Err(bad());
    }
    let bytes: Result<Vec<u8>, _> = (0..key.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&key[i..i + 2], 16))
        .collect();
    let key = String::from_utf8(bytes.map_err(|_| bad())?).map_err(|_| bad())?;
    let (ns, name) = key.split_once('/').ok_or_else(bad)?;
    Ok((rv, ns.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let token = encode_continue(42, "ns", "a/b");
        assert_eq!(
            decode_continue(&token).expect("decodes"),
            (42, "ns".to_string(), "a/b".to_string())
        );
        assert_eq!(decode_continue("nonsense").expect_err("rejected").code, 400);
    }
}
