//! Typed parsing of trigger metadata, shared by every scaler.
//!
//! A scaler declares each parameter once as a `const` [`Param`] (names, where it may come from,
//! default, enum, range, whether it is secret or deprecated) and reads it through a
//! [`MetadataParser`] into a typed value. The lookup follows KEDA's typed config
//! (`scalersconfig/typed_config.go`):
//!
//! - each [`Source`] in the order the parameter declares (default: metadata only), and within a
//!   source each name in turn (`address`, then `addresses`);
//! - [`Source::Metadata`]: `metadata[name]`; [`Source::Env`]: `metadata["<name>FromEnv"]` names a
//!   variable of the target container, whose value is used; [`Source::Auth`]: the resolved
//!   TriggerAuthentication parameter `name`;
//! - values are trimmed, and an empty value counts as absent;
//! - a present deprecated parameter is an error; a missing required parameter is an error; an
//!   absent optional one falls back to its default.
//!
//! Errors name the trigger and the parameter. A value is quoted in an error only when it came
//! from the trigger's metadata and the parameter is not marked secret.

use std::collections::BTreeMap;

use crate::error::{MetadataError, MetadataErrorKind, Source, TriggerId};
use crate::secret::Secret;

/// The largest `timeout` (milliseconds) a scaler accepts: one hour.
pub const MAX_TIMEOUT_MS: f64 = 3_600_000.0;

/// Lookup order: trigger metadata only (KEDA's default).
pub const METADATA: &[Source] = &[Source::Metadata];
/// Lookup order: metadata, then `<name>FromEnv`, then TriggerAuthentication.
pub const METADATA_ENV_AUTH: &[Source] = &[Source::Metadata, Source::Env, Source::Auth];
/// Lookup order: metadata, then TriggerAuthentication.
pub const METADATA_AUTH: &[Source] = &[Source::Metadata, Source::Auth];
/// Lookup order: metadata, then TriggerAuthentication, then `<name>FromEnv`.
pub const METADATA_AUTH_ENV: &[Source] = &[Source::Metadata, Source::Auth, Source::Env];
/// Lookup order: TriggerAuthentication, then `<name>FromEnv`.
pub const AUTH_ENV: &[Source] = &[Source::Auth, Source::Env];
/// Lookup order: TriggerAuthentication, then metadata.
pub const AUTH_METADATA: &[Source] = &[Source::Auth, Source::Metadata];
/// Lookup order: TriggerAuthentication only.
pub const AUTH: &[Source] = &[Source::Auth];

/// The declaration of one trigger parameter. Build it in a `const` with the `const fn`
/// builders, e.g.
///
/// ```
/// use keda_scalers::metadata::{Param, METADATA_ENV_AUTH};
/// const ADDRESS: Param = Param::optional("address")
///     .aliases(&["addresses"])
///     .order(METADATA_ENV_AUTH);
/// const LIST_LENGTH: Param = Param::optional("listLength").default("5").range(1.0, f64::MAX);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Param {
    /// The primary name, used in errors and docs.
    pub name: &'static str,
    /// Alternative names, tried after `name` in each source.
    pub aliases: &'static [&'static str],
    /// Where the value may come from, in order.
    pub order: &'static [Source],
    /// The value used when the parameter is absent.
    pub default: Option<&'static str>,
    /// Whether absence is an error (when there is no default).
    pub required: bool,
    /// If not empty, the only accepted values (compared exactly).
    pub allowed: &'static [&'static str],
    /// Inclusive bounds for numeric values.
    pub range: Option<(f64, f64)>,
    /// Separator of list items; map entries are `key=value` items.
    pub separator: &'static str,
    /// If set, the parameter was removed and its presence is an error with this hint.
    pub deprecated: Option<&'static str>,
    /// Never echo the value in errors, even when it comes from metadata.
    pub secret: bool,
}

impl Param {
    const fn base(name: &'static str, required: bool) -> Self {
        Self {
            name,
            aliases: &[],
            order: METADATA,
            default: None,
            required,
            allowed: &[],
            range: None,
            separator: ",",
            deprecated: None,
            secret: false,
        }
    }

    /// A parameter that must be present (unless it gets a default).
    pub const fn required(name: &'static str) -> Self {
        Self::base(name, true)
    }

    /// A parameter that may be absent.
    pub const fn optional(name: &'static str) -> Self {
        Self::base(name, false)
    }

    /// A removed parameter: present means error, with `hint` saying what to use instead.
    pub const fn deprecated(name: &'static str, hint: &'static str) -> Self {
        let mut p = Self::base(name, false);
        p.deprecated = Some(hint);
        p
    }

    /// This parameter, made required: for a parameter that is required only in some
    /// configurations (`port` when `host` is used).
    pub const fn require(mut self) -> Self {
        self.required = true;
        self
    }

    /// Alternative names (`addresses` for `address`).
    pub const fn aliases(mut self, aliases: &'static [&'static str]) -> Self {
        self.aliases = aliases;
        self
    }

    /// Where the value may come from, in order.
    pub const fn order(mut self, order: &'static [Source]) -> Self {
        self.order = order;
        self
    }

    /// The value used when absent (this also makes the parameter optional).
    pub const fn default(mut self, value: &'static str) -> Self {
        self.default = Some(value);
        self.required = false;
        self
    }

    /// The only accepted values.
    pub const fn allowed(mut self, values: &'static [&'static str]) -> Self {
        self.allowed = values;
        self
    }

    /// Inclusive bounds for a numeric value.
    pub const fn range(mut self, min: f64, max: f64) -> Self {
        self.range = Some((min, max));
        self
    }

    /// Separator of list items (default `,`).
    pub const fn separator(mut self, separator: &'static str) -> Self {
        self.separator = separator;
        self
    }

    /// Never show the value in errors.
    pub const fn secret(mut self) -> Self {
        self.secret = true;
        self
    }

    /// The primary name followed by the aliases.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }
}

/// A raw value found for a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found<'a> {
    /// The trimmed, non-empty value.
    pub value: &'a str,
    /// Where it was found.
    pub source: Source,
    /// Under which name.
    pub name: &'static str,
}

/// A type a parameter value parses into.
pub trait ParamValue: Sized {
    /// How the expected form is described in errors, after "is not": `a valid integer`.
    const EXPECTED: &'static str;

    /// Parses a trimmed, non-empty value. `None` means it is not of the expected form.
    fn parse_param(raw: &str, param: &Param) -> Option<Self>;

    /// The number to check against [`Param::range`], for numeric types.
    fn as_number(&self) -> Option<f64> {
        None
    }

    /// A bound of [`Param::range`] as errors show it (`3600` as `1h` for a duration).
    fn describe_bound(bound: f64) -> String {
        format!("{bound}")
    }

    /// When `raw` has the expected form but does not fit the type (`4294967296` for a `u32`):
    /// the type's range, for the error. `None` when `raw` is not of the form at all.
    fn out_of_type_range(_raw: &str) -> Option<String> {
        None
    }
}

impl ParamValue for String {
    const EXPECTED: &'static str = "a string";
    fn parse_param(raw: &str, _: &Param) -> Option<Self> {
        Some(raw.to_string())
    }
}

impl ParamValue for Secret {
    const EXPECTED: &'static str = "a string";
    fn parse_param(raw: &str, _: &Param) -> Option<Self> {
        Some(Secret::new(raw))
    }
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl ParamValue for $t {
            const EXPECTED: &'static str = "a valid integer";
            fn parse_param(raw: &str, _: &Param) -> Option<Self> {
                raw.parse().ok()
            }
            fn as_number(&self) -> Option<f64> {
                Some(*self as f64)
            }
            fn out_of_type_range(raw: &str) -> Option<String> {
                let digits = raw.strip_prefix(['+', '-']).unwrap_or(raw);
                (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| {
                    format!("an integer from {} to {}", <$t>::MIN, <$t>::MAX)
                })
            }
        }
    )*};
}
int_param!(i32, i64, u16, u32, u64, usize);

impl ParamValue for f64 {
    const EXPECTED: &'static str = "a valid number";
    fn parse_param(raw: &str, _: &Param) -> Option<Self> {
        raw.parse::<f64>().ok().filter(|v| v.is_finite())
    }
    fn as_number(&self) -> Option<f64> {
        Some(*self)
    }
}

impl ParamValue for bool {
    const EXPECTED: &'static str = "a valid boolean";
    /// Go's `strconv.ParseBool`: `1 t T TRUE true True 0 f F FALSE false False`.
    fn parse_param(raw: &str, _: &Param) -> Option<Self> {
        match raw {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
            _ => None,
        }
    }
}

impl ParamValue for Vec<String> {
    const EXPECTED: &'static str = "a list";
    /// Items split at the separator and trimmed; empty items are dropped.
    fn parse_param(raw: &str, param: &Param) -> Option<Self> {
        Some(
            raw.split(param.separator)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        )
    }
}

impl ParamValue for BTreeMap<String, String> {
    const EXPECTED: &'static str = "a list of key=value pairs";
    fn parse_param(raw: &str, param: &Param) -> Option<Self> {
        let mut map = BTreeMap::new();
        for item in raw.split(param.separator).map(str::trim) {
            if item.is_empty() {
                continue;
            }
            let (k, v) = item.split_once('=')?;
            let k = k.trim();
            if k.is_empty() {
                return None;
            }
            map.insert(k.to_string(), v.trim().to_string());
        }
        Some(map)
    }
}

/// `between <min> and <max>`, or `at least <min>` without an upper bound.
fn range_text<T: ParamValue>((min, max): (f64, f64)) -> String {
    if max == f64::MAX {
        format!("at least {}", T::describe_bound(min))
    } else {
        format!(
            "between {} and {}",
            T::describe_bound(min),
            T::describe_bound(max)
        )
    }
}

/// Reads typed parameters of one trigger. Cheap to create; borrows the maps.
#[derive(Clone, Copy, Debug)]
pub struct MetadataParser<'a> {
    trigger: &'a TriggerId,
    metadata: &'a BTreeMap<String, String>,
    env: &'a BTreeMap<String, String>,
    auth: &'a BTreeMap<String, Secret>,
}

impl<'a> MetadataParser<'a> {
    /// A parser over a trigger's metadata, its target container's resolved environment and its
    /// resolved authentication parameters.
    pub fn new(
        trigger: &'a TriggerId,
        metadata: &'a BTreeMap<String, String>,
        env: &'a BTreeMap<String, String>,
        auth: &'a BTreeMap<String, Secret>,
    ) -> Self {
        Self {
            trigger,
            metadata,
            env,
            auth,
        }
    }

    /// An error about this trigger.
    pub fn error(&self, kind: MetadataErrorKind) -> MetadataError {
        MetadataError {
            trigger: self.trigger.clone(),
            kind,
        }
    }

    /// An error for a rule between parameters, e.g. `"start" and "end" must differ`.
    pub fn rule(&self, message: impl Into<String>) -> MetadataError {
        self.error(MetadataErrorKind::Rule(message.into()))
    }

    /// An error saying the value of `param` is not of the expected form. The value is shown
    /// only when it may be (see the module docs).
    pub fn invalid(&self, param: &Param, found: Found<'_>, expected: &str) -> MetadataError {
        let value =
            (found.source == Source::Metadata && !param.secret).then(|| found.value.to_string());
        self.error(MetadataErrorKind::Invalid {
            param: found.name.to_string(),
            value,
            origin: found.source,
            expected: expected.to_string(),
        })
    }

    /// The raw value of `param` from the first place that has it, or `None`.
    ///
    /// # Errors
    /// The parameter is deprecated and present.
    pub fn find(&self, param: &Param) -> Result<Option<Found<'a>>, MetadataError> {
        let found = self.lookup(param);
        if let (Some(hint), Some(f)) = (param.deprecated, found) {
            return Err(self.error(MetadataErrorKind::Deprecated {
                param: f.name.to_string(),
                hint: hint.to_string(),
            }));
        }
        Ok(found)
    }

    fn lookup(&self, param: &Param) -> Option<Found<'a>> {
        for &source in param.order {
            for name in param.names() {
                let value = match source {
                    Source::Metadata => self.metadata.get(name).map(String::as_str),
                    Source::Env => self
                        .metadata
                        .get(&format!("{name}FromEnv"))
                        .map(|var| var.trim())
                        .filter(|var| !var.is_empty())
                        .and_then(|var| self.env.get(var))
                        .map(String::as_str),
                    Source::Auth => self.auth.get(name).map(Secret::expose),
                };
                if let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) {
                    return Some(Found {
                        value,
                        source,
                        name,
                    });
                }
            }
        }
        None
    }

    /// Whether `param` has a value anywhere (its default does not count).
    pub fn is_present(&self, param: &Param) -> bool {
        self.lookup(param).is_some()
    }

    /// The typed value of `param`, its default when absent, or `None` when absent without a
    /// default.
    ///
    /// # Errors
    /// Absent and required; present and deprecated; not parseable as `T`; not one of
    /// [`Param::allowed`]; outside [`Param::range`].
    pub fn get_opt<T: ParamValue>(&self, param: &Param) -> Result<Option<T>, MetadataError> {
        let found = match (self.find(param)?, param.default) {
            (Some(found), _) => found,
            (None, Some(default)) => Found {
                value: default,
                source: Source::Metadata,
                name: param.name,
            },
            (None, None) if param.required => {
                return Err(self.error(MetadataErrorKind::Missing {
                    param: param.name.to_string(),
                }));
            }
            (None, None) => return Ok(None),
        };
        self.parse(param, found).map(Some)
    }

    /// The typed value of `param` or its default.
    ///
    /// # Errors
    /// As [`MetadataParser::get_opt`], and also when an optional parameter without a default is
    /// absent (reported as missing).
    pub fn get<T: ParamValue>(&self, param: &Param) -> Result<T, MetadataError> {
        self.get_opt(param)?.ok_or_else(|| {
            self.error(MetadataErrorKind::Missing {
                param: param.name.to_string(),
            })
        })
    }

    /// Parses a found value as `param` declares.
    ///
    /// # Errors
    /// As [`MetadataParser::get_opt`].
    pub fn parse<T: ParamValue>(
        &self,
        param: &Param,
        found: Found<'_>,
    ) -> Result<T, MetadataError> {
        if !param.allowed.is_empty() && !param.allowed.contains(&found.value) {
            let expected = format!("one of {}", param.allowed.join(", "));
            return Err(self.invalid(param, found, &expected));
        }
        let Some(value) = T::parse_param(found.value, param) else {
            // An integer too large for its type is out of range, not of the wrong form.
            let expected = match (T::out_of_type_range(found.value), param.range) {
                (Some(_), Some(range)) => range_text::<T>(range),
                (Some(type_range), None) => type_range,
                (None, _) => T::EXPECTED.to_string(),
            };
            return Err(self.invalid(param, found, &expected));
        };
        if let (Some(range), Some(n)) = (param.range, value.as_number())
            && !(range.0..=range.1).contains(&n)
        {
            return Err(self.invalid(param, found, &range_text::<T>(range)));
        }
        Ok(value)
    }

    /// At most one of `params` may be present.
    ///
    /// # Errors
    /// [`MetadataErrorKind::Exclusive`] naming the ones that are.
    pub fn exclusive(&self, params: &[&Param]) -> Result<(), MetadataError> {
        let present: Vec<String> = params
            .iter()
            .filter_map(|p| self.lookup(p).map(|f| f.name.to_string()))
            .collect();
        if present.len() > 1 {
            return Err(self.error(MetadataErrorKind::Exclusive { params: present }));
        }
        Ok(())
    }

    /// At least one of `params` must be present.
    ///
    /// # Errors
    /// [`MetadataErrorKind::MissingOneOf`] naming every name of every parameter.
    pub fn one_of(&self, params: &[&Param]) -> Result<(), MetadataError> {
        if params.iter().any(|p| self.is_present(p)) {
            return Ok(());
        }
        Err(self.error(MetadataErrorKind::MissingOneOf {
            params: params
                .iter()
                .flat_map(|p| p.names())
                .map(str::to_string)
                .collect(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Trigger {
        id: TriggerId,
        metadata: BTreeMap<String, String>,
        env: BTreeMap<String, String>,
        auth: BTreeMap<String, Secret>,
    }

    impl Trigger {
        fn new(metadata: &[(&str, &str)], env: &[(&str, &str)], auth: &[(&str, &str)]) -> Self {
            let map = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
                kv.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            };
            Self {
                id: TriggerId {
                    index: 0,
                    trigger_type: "redis".into(),
                },
                metadata: map(metadata),
                env: map(env),
                auth: auth
                    .iter()
                    .map(|(k, v)| (k.to_string(), Secret::new(*v)))
                    .collect(),
            }
        }
        fn parser(&self) -> MetadataParser<'_> {
            MetadataParser::new(&self.id, &self.metadata, &self.env, &self.auth)
        }
    }

    const LIST_NAME: Param = Param::required("listName");
    const LIST_LENGTH: Param = Param::optional("listLength")
        .default("5")
        .range(1.0, f64::MAX);
    const ADDRESS: Param = Param::optional("address")
        .aliases(&["addresses"])
        .order(METADATA_ENV_AUTH);
    const PASSWORD: Param = Param::optional("password").order(METADATA_ENV_AUTH);
    const HOST_AUTH_FIRST: Param = Param::optional("host").order(AUTH_ENV);
    const MODE: Param = Param::optional("mode").allowed(&["QueueLength", "MessageRate"]);
    const OLD: Param = Param::deprecated("type", "set the trigger's metricType instead");
    const ENABLE_TLS: Param = Param::optional("enableTLS");
    const TLS: Param = Param::optional("tls").order(AUTH);

    #[test]
    fn lookup_follows_declared_order_and_aliases() {
        // (metadata, env, auth, param, expected value, expected source)
        type Row<'a> = (
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            Param,
            Option<(&'a str, Source)>,
        );
        let rows: &[Row<'_>] = &[
            // metadata wins over env and auth
            (
                &[("address", "m:1"), ("addressFromEnv", "A")],
                &[("A", "e:1")],
                &[("address", "a:1")],
                ADDRESS,
                Some(("m:1", Source::Metadata)),
            ),
            // FromEnv names a container variable
            (
                &[("addressFromEnv", "A")],
                &[("A", " e:1 ")],
                &[("address", "a:1")],
                ADDRESS,
                Some(("e:1", Source::Env)),
            ),
            // an alias is found too
            (
                &[("addresses", "x:1,y:2")],
                &[],
                &[],
                ADDRESS,
                Some(("x:1,y:2", Source::Metadata)),
            ),
            // auth is last
            (
                &[],
                &[],
                &[("address", "a:1")],
                ADDRESS,
                Some(("a:1", Source::Auth)),
            ),
            // empty and whitespace-only values are absent
            (
                &[("address", "  ")],
                &[],
                &[("address", "a:1")],
                ADDRESS,
                Some(("a:1", Source::Auth)),
            ),
            // FromEnv naming a missing variable is absent
            (&[("addressFromEnv", "NOPE")], &[], &[], ADDRESS, None),
            // a parameter read only from auth ignores metadata
            (&[("tls", "enable")], &[], &[], TLS, None),
            // auth before env when declared so
            (
                &[("hostFromEnv", "H")],
                &[("H", "env-host")],
                &[("host", "auth-host")],
                HOST_AUTH_FIRST,
                Some(("auth-host", Source::Auth)),
            ),
        ];
        for (i, (metadata, env, auth, param, expected)) in rows.iter().enumerate() {
            let t = Trigger::new(metadata, env, auth);
            let found = t.parser().find(param).unwrap().map(|f| (f.value, f.source));
            assert_eq!(found, *expected, "row {i}");
        }
    }

    #[test]
    fn typed_values_defaults_and_errors() {
        let t = Trigger::new(&[("listName", " jobs "), ("listLength", "abc")], &[], &[]);
        let p = t.parser();
        assert_eq!(p.get::<String>(&LIST_NAME).unwrap(), "jobs");
        assert_eq!(
            p.get::<i64>(&LIST_LENGTH).unwrap_err().to_string(),
            r#"trigger 0 (redis): parameter "listLength": "abc" is not a valid integer"#
        );

        let t = Trigger::new(&[], &[], &[]);
        let p = t.parser();
        assert_eq!(p.get::<i64>(&LIST_LENGTH).unwrap(), 5);
        assert_eq!(
            p.get::<String>(&LIST_NAME).unwrap_err().to_string(),
            r#"trigger 0 (redis): missing required parameter "listName""#
        );
        assert_eq!(p.get_opt::<String>(&ADDRESS).unwrap(), None);
    }

    #[test]
    fn range_enum_and_deprecated_are_enforced() {
        let t = Trigger::new(
            &[
                ("listLength", "0"),
                ("mode", "Foo"),
                ("type", "Utilization"),
            ],
            &[],
            &[],
        );
        let p = t.parser();
        assert_eq!(
            p.get::<i64>(&LIST_LENGTH).unwrap_err().to_string(),
            r#"trigger 0 (redis): parameter "listLength": "0" is not at least 1"#
        );
        // An integer too large for the type names the range too, not "not a valid integer".
        let huge = Trigger::new(
            &[("listLength", "99999999999999999999"), ("port", "-1")],
            &[],
            &[],
        );
        let big = huge.parser();
        assert_eq!(
            big.get::<i64>(&LIST_LENGTH).unwrap_err().to_string(),
            r#"trigger 0 (redis): parameter "listLength": "99999999999999999999" is not at least 1"#
        );
        assert_eq!(
            big.get_opt::<u16>(&Param::optional("port"))
                .unwrap_err()
                .to_string(),
            r#"trigger 0 (redis): parameter "port": "-1" is not an integer from 0 to 65535"#
        );
        assert_eq!(
            p.get_opt::<String>(&MODE).unwrap_err().to_string(),
            r#"trigger 0 (redis): parameter "mode": "Foo" is not one of QueueLength, MessageRate"#
        );
        assert_eq!(
            p.get_opt::<String>(&OLD).unwrap_err().to_string(),
            r#"trigger 0 (redis): parameter "type" is no longer supported: set the trigger's metricType instead"#
        );
    }

    #[test]
    fn values_from_auth_or_env_or_secret_params_are_never_echoed() {
        const SECRET_META: Param = Param::optional("password").secret();
        let t = Trigger::new(
            &[("portFromEnv", "P"), ("password", "hunter2")],
            &[("P", "s3cr3t")],
            &[("listLength", "topsecret")],
        );
        let p = t.parser();
        let from_auth = Param::optional("listLength").order(AUTH);
        let err = p.get_opt::<i64>(&from_auth).unwrap_err().to_string();
        assert_eq!(
            err,
            r#"trigger 0 (redis): parameter "listLength": the value from TriggerAuthentication is not a valid integer"#
        );
        let from_env = Param::optional("port").order(METADATA_ENV_AUTH);
        let err = p.get_opt::<u16>(&from_env).unwrap_err().to_string();
        assert!(!err.contains("s3cr3t"), "{err}");
        let err = p.get_opt::<i64>(&SECRET_META).unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{err}");
        let _ = PASSWORD;
    }

    #[test]
    fn booleans_follow_go_parse_bool() {
        for (raw, expected) in [
            ("true", Some(true)),
            ("1", Some(true)),
            ("T", Some(true)),
            ("False", Some(false)),
            ("0", Some(false)),
            ("yes", None),
            ("tRUE", None),
        ] {
            assert_eq!(bool::parse_param(raw, &ENABLE_TLS), expected, "{raw}");
        }
    }

    #[test]
    fn lists_and_maps_split_at_the_separator() {
        let list = Param::optional("hosts");
        assert_eq!(
            Vec::<String>::parse_param(" a , b,,c ", &list).unwrap(),
            vec!["a", "b", "c"]
        );
        let semi = Param::optional("headers").separator(";");
        let map = BTreeMap::<String, String>::parse_param("a=1; b = 2", &semi).unwrap();
        assert_eq!(map.get("b").map(String::as_str), Some("2"));
        assert_eq!(BTreeMap::<String, String>::parse_param("a", &semi), None);
    }

    #[test]
    fn exclusive_and_one_of_name_the_parameters() {
        let t = Trigger::new(&[("enableTLS", "true")], &[], &[("tls", "enable")]);
        assert_eq!(
            t.parser()
                .exclusive(&[&ENABLE_TLS, &TLS])
                .unwrap_err()
                .to_string(),
            r#"trigger 0 (redis): parameters "enableTLS" and "tls" cannot be used together"#
        );
        let t = Trigger::new(&[], &[], &[]);
        let host = Param::optional("host").aliases(&["hosts"]);
        assert_eq!(
            t.parser()
                .one_of(&[&ADDRESS, &host])
                .unwrap_err()
                .to_string(),
            r#"trigger 0 (redis): missing required parameter: one of "address", "addresses", "host" and "hosts""#
        );
    }
}
