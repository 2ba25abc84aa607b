//! How stored objects are shown to a client: at the requested version, or as
//! `PartialObjectMetadata` when the client asks for metadata only.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::registry::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::table::TableView;

/// The rendering a request asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    pub api_version: String,
    pub kind: String,
    /// `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`.
    pub partial: bool,
    /// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (reads only).
    pub table: Option<TableView>,
}

impl View {
    pub(crate) fn new(def: &ResourceDef, accept: &str) -> Self {
        Self {
            api_version: def.api_version(),
            kind: def.kind.clone(),
            partial: crate::table::negotiate(accept) == crate::table::Wanted::PartialObjectMetadata,
            table: None,
        }
    }

    /// The view of a read (get, list, watch): a Table when `Accept` asks for one first.
    pub(crate) fn for_read(
        def: &Arc<ResourceDef>,
        accept: &str,
        include_object: Option<&str>,
    ) -> Self {
        let mut view = Self::new(def, accept);
        if let crate::table::Wanted::Table(version) = crate::table::negotiate(accept) {
            view.table = Some(TableView::new(
                version,
                crate::table::IncludeObject::from_query(include_object),
                def.clone(),
            ));
        }
        view
    }

    /// The object as this view shows it. Objects are stored with the apiVersion they were last
    /// written at; there is no conversion between versions, only the apiVersion is rewritten.
    pub(crate) fn render<'a>(&self, obj: &'a Value) -> Cow<'a, Value> {
        if let Some(table) = &self.table {
            return Cow::Owned(table.one(obj));
        }
        if self.partial {
            return Cow::Owned(json!({
                "apiVersion": "meta.k8s.io/v1",
                "kind": "PartialObjectMetadata",
                "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
            }));
        }
        if obj.get("apiVersion").and_then(Value::as_str) == Some(self.api_version.as_str()) {
            return Cow::Borrowed(obj);
        }
        let mut owned = obj.clone();
        if let Some(map) = owned.as_object_mut() {
            map.insert(
                "apiVersion".to_string(),
                Value::String(self.api_version.clone()),
            );
        }
        Cow::Owned(owned)
    }

    /// Whether a stored object can be sent as is (its pre-serialized watch line fits).
    pub(crate) fn is_identity_for(&self, obj: &Value) -> bool {
        self.table.is_none()
            && !self.partial
            && obj.get("apiVersion").and_then(Value::as_str) == Some(self.api_version.as_str())
    }

    pub(crate) fn list(
        &self,
        items: Vec<Value>,
        resource_version: u64,
        continue_token: Option<String>,
    ) -> Value {
        if let Some(table) = &self.table {
            return table.list(&items, resource_version, continue_token);
        }
        let (api_version, kind) = if self.partial {
            (
                "meta.k8s.io/v1".to_string(),
                "PartialObjectMetadataList".to_string(),
            )
        } else {
            (self.api_version.clone(), format!("{}List", self.kind))
        };
        let mut metadata = json!({ "resourceVersion": resource_version.to_string() });
        if let (Some(token), Some(map)) = (continue_token, metadata.as_object_mut()) {
            map.insert("continue".to_string(), Value::String(token));
        }
        json!({ "apiVersion": api_version, "kind": kind, "metadata": metadata, "items": items })
    }
}

/// A request's selectors together.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}
