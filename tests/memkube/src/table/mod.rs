//! `meta.k8s.io` Tables: what `kubectl get` asks for (`Accept:
//! application/json;as=Table;v=v1;g=meta.k8s.io`, or `v1beta1`) and prints.
//!
//! Custom resources get `Name` and their CRD's `additionalPrinterColumns` (`Age` when the CRD
//! has none), evaluated as the API server does: the first value the column's JSONPath selects,
//! written as text for a `string` column (JSON for an object or a list), as a number or a
//! boolean for the other types, and as an age (`4m12s`) for a `date` column. Built-in kinds get
//! kube-apiserver's columns ([`builtin`]). Rows carry the object as `includeObject` asks:
//! `PartialObjectMetadata` by default (kubectl reads the namespace and labels from it),
//! `Object`, or `None`.

mod builtin;
mod format;
mod jsonpath;

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};

pub(crate) use jsonpath::JsonPath;

use crate::registry::{PrinterColumn, ResourceDef};

/// One column of a Table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
}

impl Column {
    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    /// `includeObject=None|Metadata|Object`; Metadata when absent or unknown.
    pub(crate) fn from_query(value: Option<&str>) -> Self {
        match value {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// A request for Tables: its `meta.k8s.io` version and what rows carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableView {
    version: &'static str,
    include: IncludeObject,
    def: Arc<ResourceDef>,
}

/// The first media range of `accept` memkube can answer: a Table (with its version), a
/// `PartialObjectMetadata` view, or plain JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wanted {
    Table(&'static str),
    PartialObjectMetadata,
    Json,
}

/// Reads `Accept` as the API server negotiates it: ranges in order, the first one served wins.
pub(crate) fn negotiate(accept: &str) -> Wanted {
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let (mut as_, mut group, mut version) = (None, None, None);
        for param in parts {
            match param.split_once('=') {
                Some(("as", v)) => as_ = Some(v),
                Some(("g", v)) => group = Some(v),
                Some(("v", v)) => version = Some(v),
                _ => {}
            }
        }
        if !matches!(media, "application/json" | "*/*" | "application/*") {
            continue;
        }
        match (as_, group, version) {
            (None, _, _) => return Wanted::Json,
            (Some("Table"), Some("meta.k8s.io"), Some("v1")) => return Wanted::Table("v1"),
            (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => {
                return Wanted::Table("v1beta1");
            }
            (Some("PartialObjectMetadata"), _, _) => return Wanted::PartialObjectMetadata,
            _ => {}
        }
    }
    Wanted::Json
}

impl TableView {
    pub(crate) fn new(
        version: &'static str,
        include: IncludeObject,
        def: Arc<ResourceDef>,
    ) -> Self {
        Self {
            version,
            include,
            def,
        }
    }

    fn api_version(&self) -> String {
        format!("meta.k8s.io/{}", self.version)
    }

    fn columns(&self) -> Vec<Column> {
        match &self.def.printer_columns {
            Some(columns) => {
                let mut all = vec![Column {
                    name: "Name".to_string(),
                    type_: "string".to_string(),
                    format: "name".to_string(),
                    description: "The object's name, unique within its namespace.".to_string(),
                    priority: 0,
                }];
                all.extend(columns.iter().map(|c| Column {
                    name: c.name.clone(),
                    type_: c.type_.clone(),
                    format: c.format.clone(),
                    description: c.description.clone().unwrap_or_else(|| {
                        format!(
                            "Custom resource definition column (in JSONPath format): {}",
                            c.json_path
                        )
                    }),
                    priority: c.priority,
                }));
                all
            }
            None => (builtin::printer(&self.def.group, &self.def.plural).columns)(),
        }
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        match &self.def.printer_columns {
            Some(columns) => {
                let mut cells = vec![json!(
                    obj.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                )];
                cells.extend(columns.iter().map(|c| crd_cell(c, obj, now)));
                cells
            }
            None => (builtin::printer(&self.def.group, &self.def.plural).cells)(obj, now),
        }
    }

    fn row(&self, obj: &Value, now: Timestamp) -> Value {
        let mut row = json!({ "cells": self.cells(obj, now) });
        let object = match self.include {
            IncludeObject::None => None,
            IncludeObject::Metadata => Some(json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": self.api_version(),
                "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
            })),
            IncludeObject::Object => Some(obj.clone()),
        };
        if let (Some(object), Some(map)) = (object, row.as_object_mut()) {
            map.insert("object".to_string(), object);
        }
        row
    }

    fn table(&self, rows: Vec<Value>, metadata: Value) -> Value {
        json!({
            "kind": "Table",
            "apiVersion": self.api_version(),
            "metadata": metadata,
            "columnDefinitions": self.columns().iter().map(Column::to_json).collect::<Vec<_>>(),
            "rows": rows,
        })
    }

    /// A Table of one object (a get, or one watch event).
    pub(crate) fn one(&self, obj: &Value) -> Value {
        let mut metadata = json!({});
        if let (Some(rv), Some(map)) = (
            obj.pointer("/metadata/resourceVersion"),
            metadata.as_object_mut(),
        ) {
            map.insert("resourceVersion".to_string(), rv.clone());
        }
        self.table(vec![self.row(obj, Timestamp::now())], metadata)
    }

    /// A Table of a list's items.
    pub(crate) fn list(
        &self,
        items: &[Value],
        resource_version: u64,
        continue_token: Option<String>,
    ) -> Value {
        let now = Timestamp::now();
        let mut metadata = json!({ "resourceVersion": resource_version.to_string() });
        if let (Some(token), Some(map)) = (continue_token, metadata.as_object_mut()) {
            map.insert("continue".to_string(), Value::String(token));
        }
        self.table(items.iter().map(|o| self.row(o, now)).collect(), metadata)
    }
}

/// One custom column's cell (the API server's `tableconvertor`): the first value selected, or
/// nothing.
fn crd_cell(column: &PrinterColumn, obj: &Value, now: Timestamp) -> Value {
    let Ok(path) = JsonPath::parse(&column.json_path) else {
        return Value::Null;
    };
    let Some(value) = path.find(obj).into_iter().next() else {
        return Value::Null;
    };
    match column.type_.as_str() {
        "string" => format::text(value).map_or(Value::Null, Value::String),
        "integer" => match value {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(saturating_i64))
                .map_or(Value::Null, |i| json!(i)),
            _ => Value::Null,
        },
        "number" => match value {
            Value::Number(n) => n.as_f64().map_or(Value::Null, |f| json!(f)),
            _ => Value::Null,
        },
        "boolean" => match value {
            Value::Bool(b) => json!(b),
            _ => Value::Null,
        },
        "date" => match value {
            Value::String(s) => json!(format::age(Some(s), now)),
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// Go's `int64(f)` for a float in range, saturating outside it (NaN: 0).
fn saturating_i64(f: f64) -> i64 {
    if f.is_nan() {
        0
    } else if f >= 9.223_372_036_854_776e18 {
        i64::MAX
    } else if f <= -9.223_372_036_854_776e18 {
        i64::MIN
    } else {
        // In range and truncated toward zero, as Go converts.
        #[allow(clippy::cast_possible_truncation)]
        let i = f.trunc() as i64;
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_s_accept_header_asks_for_a_v1_table() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(kubectl), Wanted::Table("v1"));
        assert_eq!(
            negotiate("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
            Wanted::Table("v1beta1")
        );
        assert_eq!(
            negotiate("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Wanted::PartialObjectMetadata
        );
        assert_eq!(negotiate("application/json"), Wanted::Json);
        assert_eq!(negotiate(""), Wanted::Json);
        // A Table of a version memkube does not know falls through to the next range.
        assert_eq!(
            negotiate("application/json;as=Table;v=v2;g=meta.k8s.io,application/json"),
            Wanted::Json
        );
    }

    #[test]
    fn integer_cells_truncate_floats_as_go_does() {
        assert_eq!(saturating_i64(2.9), 2);
        assert_eq!(saturating_i64(-2.9), -2);
        assert_eq!(saturating_i64(1e300), i64::MAX);
        assert_eq!(saturating_i64(f64::NAN), 0);
    }
}
