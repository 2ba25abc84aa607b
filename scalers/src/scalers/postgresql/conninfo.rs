//! PostgreSQL connection strings as KEDA users write them (KEDA hands them to pgx): libpq's
//! `key=value` form (`host=db port=5432 user=app password='a b' dbname=jobs sslmode=require`)
//! or a URL (`postgres://app:secret@db:5432/jobs?sslmode=require`), parsed into one map of
//! settings.
//!
//! Messages never repeat a value: the string holds a password.

use std::collections::BTreeMap;

/// The settings of a connection string, by libpq keyword (a URL's parts become `user`,
/// `password`, `host`, `port` and `dbname`). A later occurrence of a key wins, as in libpq.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnInfo(pub BTreeMap<String, String>);

impl ConnInfo {
    /// Parses a connection string in either form.
    ///
    /// # Errors
    /// A message naming what is malformed, without the value.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        for scheme in ["postgresql://", "postgres://"] {
            if let Some(rest) = text.strip_prefix(scheme) {
                return parse_url(rest);
            }
        }
        parse_keywords(text)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Sets `key` (an empty value removes it).
    pub fn set(&mut self, key: &str, value: &str) {
        if value.is_empty() {
            self.0.remove(key);
        } else {
            self.0.insert(key.to_string(), value.to_string());
        }
    }

    /// Removes `key` and returns its value.
    pub fn take(&mut self, key: &str) -> Option<String> {
        self.0.remove(key)
    }

    /// The settings as a libpq `key=value` string, every value quoted.
    pub fn to_keywords(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={}", quote(v)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `'value'` with `\` and `'` escaped, as libpq reads it.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn parse_keywords(text: &str) -> Result<ConnInfo, String> {
    let mut settings = ConnInfo::default();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(settings);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            // The word is not named: it may be half of an unquoted password with a space.
            return Err(
                "a word is not followed by \"=\": expected key=value pairs (quote values \
                        that contain spaces: key='a b') or a postgres:// URL"
                    .to_string(),
            );
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => return Err(format!("the quoted value of \"{key}\" is not closed")),
                    },
                    Some(c) => value.push(c),
                    None => return Err(format!("the quoted value of \"{key}\" is not closed")),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    if let Some(escaped) = chars.next() {
                        value.push(escaped);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        settings.0.insert(key, value);
    }
}

fn decode(text: &str, what: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("the {what} of the URL is not valid percent-encoded UTF-8"))
}

/// `[user[:password]@][host][:port][,host[:port]...][/dbname][?key=value&...]`.
fn parse_url(rest: &str) -> Result<ConnInfo, String> {
    let mut settings = ConnInfo::default();
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, dbname) = match rest.split_once('/') {
        Some((a, d)) => (a, Some(d)),
        None => (rest, None),
    };
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if let Some(userinfo) = userinfo {
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => (userinfo, None),
        };
        settings.set("user", &decode(user, "user")?);
        if let Some(password) = password {
            settings.set("password", &decode(password, "password")?);
        }
    }
    let mut host_list = Vec::new();
    let mut port_list = Vec::new();
    for spec in hosts.split(',').filter(|s| !s.is_empty()) {
        let (host, port) = if let Some(v6) = spec.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or("an IPv6 host of the URL has no closing \"]\"")?;
            (host, after.strip_prefix(':'))
        } else {
            match spec.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (spec, None),
            }
        };
        host_list.push(decode(host, "host")?);
        port_list.push(port.unwrap_or("").to_string());
    }
    settings.set("host", &host_list.join(","));
    if port_list.iter().any(|p| !p.is_empty()) {
        settings.set("port", &port_list.join(","));
    }
    if let Some(dbname) = dbname {
        settings.set("dbname", &decode(dbname, "database name")?);
    }
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        // Go's url.Query, which pgx uses, reads '+' as a space.
        let key = decode(&key.replace('+', " "), "query")?;
        let value = decode(&value.replace('+', " "), "query")?;
        settings.set(&key, &value);
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> ConnInfo {
        ConnInfo(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn keyword_strings_follow_libpq_quoting() {
        let rows: &[(&str, &[(&str, &str)])] = &[
            (
                "host=db port=5432 user=app dbname=jobs sslmode=disable",
                &[
                    ("host", "db"),
                    ("port", "5432"),
                    ("user", "app"),
                    ("dbname", "jobs"),
                    ("sslmode", "disable"),
                ],
            ),
            // Spaces around '=', quoted values with escapes, empty quoted values.
            (
                "  password = 'x y' user='a b' ",
                &[("password", "x y"), ("user", "a b")],
            ),
            (
                r"password='it\'s \\ ok' options=''",
                &[("password", r"it's \ ok"), ("options", "")],
            ),
            // A backslash escapes in unquoted values too; a later key wins.
            (
                r"password=a\ b host=x host=y",
                &[("password", "a b"), ("host", "y")],
            ),
        ];
        for (text, expected) in rows {
            assert_eq!(ConnInfo::parse(text).unwrap(), map(expected), "{text}");
        }
    }

    #[test]
    fn urls_become_the_same_settings() {
        let parsed =
            ConnInfo::parse("postgresql://app:p%40ss%3Aw@db.svc:6432/my%20db?sslmode=require&application_name=keda+rs")
                .unwrap();
        assert_eq!(
            parsed,
            map(&[
                ("user", "app"),
                ("password", "p@ss:w"),
                ("host", "db.svc"),
                ("port", "6432"),
                ("dbname", "my db"),
                ("sslmode", "require"),
                ("application_name", "keda rs"),
            ])
        );
        let multi = ConnInfo::parse("postgres://a,[::1]:5433,c:5434/").unwrap();
        assert_eq!(multi.get("host"), Some("a,::1,c"));
        assert_eq!(multi.get("port"), Some(",5433,5434"));
        assert_eq!(multi.get("dbname"), None);
        let bare = ConnInfo::parse("postgres://db").unwrap();
        assert_eq!(bare, map(&[("host", "db")]));
    }

    #[test]
    fn malformed_strings_are_described_without_their_values() {
        for text in [
            "host=db password='s3cret",
            "host=db s3cret",
            "postgres://u:s3cret@[::1/db",
            "postgres://u:%FFs3cret@db/x",
        ] {
            let err = ConnInfo::parse(text).unwrap_err();
            assert!(!err.contains("s3cret"), "{text}: {err}");
        }
    }

    #[test]
    fn keyword_output_round_trips() {
        let settings = map(&[("password", r"a 'b' \c"), ("host", "db")]);
        assert_eq!(settings.to_keywords(), r"host='db' password='a \'b\' \\c'");
        assert_eq!(ConnInfo::parse(&settings.to_keywords()).unwrap(), settings);
    }
}
