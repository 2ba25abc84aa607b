//! Walking and editing a CRD's `openAPIV3Schema` by path.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// One step of a schema path: a property, the items of an array (`[]`), or the values of a
/// map (`{*}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step<'a> {
    Field(&'a str),
    Items,
    Values,
}

/// Parses `.spec.triggers[].type` or `.status.triggersActivity{*}.isActive` into steps.
pub(crate) fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("[]") {
            out.push(Step::Items);
            rest = r;
        } else if let Some(r) = rest.strip_prefix("{*}") {
            out.push(Step::Values);
            rest = r;
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            let end = r.find(['.', '[', '{']).unwrap_or(r.len());
            out.push(Step::Field(&r[..end]));
            rest = &r[end..];
        }
    }
    out
}

/// The schema at `path`, if every step exists.
pub(crate) fn at_mut<'s>(
    root: &'s mut JSONSchemaProps,
    path: &str,
) -> Option<&'s mut JSONSchemaProps> {
    let mut node = root;
    for step in steps(path) {
        node = match step {
            Step::Field(name) => node.properties.as_mut()?.get_mut(name)?,
            Step::Items => match node.items.as_mut()? {
                JSONSchemaPropsOrArray::Schema(items) => items,
                JSONSchemaPropsOrArray::Schemas(_) => return None,
            },
            Step::Values => match node.additional_properties.as_mut()? {
                JSONSchemaPropsOrBool::Schema(values) => values,
                JSONSchemaPropsOrBool::Bool(_) => return None,
            },
        };
    }
    Some(node)
}

/// Calls `f` on `schema` and every schema below it.
pub(crate) fn for_each_mut(schema: &mut JSONSchemaProps, f: &mut impl FnMut(&mut JSONSchemaProps)) {
    f(schema);
    if let Some(properties) = schema.properties.as_mut() {
        for sub in properties.values_mut() {
            for_each_mut(sub, f);
        }
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(items)) => for_each_mut(items, f),
        Some(JSONSchemaPropsOrArray::Schemas(all)) => {
            all.iter_mut().for_each(|s| for_each_mut(s, f))
        }
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = schema.additional_properties.as_mut() {
        for_each_mut(values, f);
    }
    for list in [&mut schema.any_of, &mut schema.all_of, &mut schema.one_of]
        .into_iter()
        .flatten()
    {
        list.iter_mut().for_each(|s| for_each_mut(s, f));
    }
}

/// Adds `name` to the schema's `required` list (once).
pub(crate) fn require(schema: &mut JSONSchemaProps, name: &str) {
    let required = schema.required.get_or_insert_with(Vec::new);
    if !required.iter().any(|r| r == name) {
        required.push(name.to_string());
    }
}

/// Removes `name` from the schema's `required` list (and the list when it becomes empty).
pub(crate) fn unrequire(schema: &mut JSONSchemaProps, name: &str) {
    if let Some(required) = schema.required.as_mut() {
        required.retain(|r| r != name);
        if required.is_empty() {
            schema.required = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_fields_items_and_map_values() {
        assert_eq!(
            steps(".spec.triggers[].type"),
            vec![
                Step::Field("spec"),
                Step::Field("triggers"),
                Step::Items,
                Step::Field("type")
            ]
        );
        assert_eq!(
            steps(".status.triggersActivity{*}.isActive"),
            vec![
                Step::Field("status"),
                Step::Field("triggersActivity"),
                Step::Values,
                Step::Field("isActive")
            ]
        );
        assert!(steps("").is_empty());
    }
}
