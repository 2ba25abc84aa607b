//! MySQL connection strings as KEDA users write them: the DSN format of Go's
//! go-sql-driver/mysql, `[user[:password]@][net[(addr)]]/dbname[?param=value&...]`, e.g.
//! `app:secret@tcp(mysql.db.svc:3306)/jobs?tls=true`.
//!
//! Messages never repeat the string or its parts: it holds a password.

/// A parsed DSN.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dsn {
    /// The user (as written; Go does not unescape it).
    pub user: String,
    /// The password (as written).
    pub password: String,
    /// `tcp` (the default) or `unix`.
    pub net: String,
    /// `host[:port]`, empty for the default.
    pub addr: String,
    /// The database, path-unescaped; may be empty.
    pub db_name: String,
    /// The parameters, query-unescaped, in order.
    pub params: Vec<(String, String)>,
}

impl Dsn {
    /// Parses `dsn` as go-sql-driver's `ParseDSN` does: the last `/` ends the address part;
    /// before it, the last `@` ends the user info, whose first `:` starts the password; the
    /// address is what the parentheses after the network name hold.
    ///
    /// # Errors
    /// What is malformed, without the value.
    pub fn parse(dsn: &str) -> Result<Self, String> {
        let slash = dsn.rfind('/').ok_or(
            "it has no \"/\" before the database name (write user:password@tcp(host:3306)/dbname)",
        )?;
        let (head, tail) = (&dsn[..slash], &dsn[slash + 1..]);
        let mut parsed = Self {
            net: "tcp".to_string(),
            ..Self::default()
        };
        let address = match head.rfind('@') {
            Some(at) => {
                let userinfo = &head[..at];
                match userinfo.split_once(':') {
                    Some((user, password)) => {
                        parsed.user = user.to_string();
                        parsed.password = password.to_string();
                    }
                    None => parsed.user = userinfo.to_string(),
                }
                &head[at + 1..]
            }
            None => head,
        };
        match address.split_once('(') {
            Some((net, addr)) => {
                let addr = addr
                    .strip_suffix(')')
                    .ok_or("the address is not closed by \")\" before the \"/\"")?;
                parsed.net = net.to_string();
                parsed.addr = addr.to_string();
            }
            None if !address.is_empty() => parsed.net = address.to_string(),
            None => {}
        }
        if parsed.net.is_empty() {
            parsed.net = "tcp".to_string();
        }
        let (db, query) = match tail.split_once('?') {
            Some((db, query)) => (db, Some(query)),
            None => (tail, None),
        };
        parsed.db_name =
            unescape(db, false).ok_or("the database name is not valid percent-encoding")?;
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or("a parameter after \"?\" is not key=value")?;
            let value =
                unescape(value, true).ok_or("a parameter value is not valid percent-encoding")?;
            parsed.params.push((key.to_string(), value));
        }
        Ok(parsed)
    }

    /// The host and port of `addr` (default `127.0.0.1:3306`, Go's default for tcp).
    ///
    /// # Errors
    /// A port that is not a number.
    pub fn host_port(&self) -> Result<(String, u16), String> {
        if self.addr.is_empty() {
            return Ok(("127.0.0.1".to_string(), 3306));
        }
        let (host, port) = match self.addr.strip_prefix('[') {
            Some(v6) => {
                let (host, rest) = v6
                    .split_once(']')
                    .ok_or("an IPv6 address is not closed by \"]\"")?;
                (host, rest.strip_prefix(':'))
            }
            None => match self.addr.rsplit_once(':') {
                Some((host, port)) if !host.contains(':') => (host, Some(port)),
                _ => (self.addr.as_str(), None),
            },
        };
        let port = match port {
            Some(port) => port
                .parse()
                .map_err(|_| "the port of the address is not a number")?,
            None => 3306,
        };
        Ok((host.to_string(), port))
    }
}

/// Go's `url.PathUnescape` (`plus_is_space` false) or `url.QueryUnescape` (true).
fn unescape(text: &str, plus_is_space: bool) -> Option<String> {
    let text = if plus_is_space {
        text.replace('+', " ")
    } else {
        text.to_string()
    };
    let bytes = text.as_bytes();
    // Go rejects a '%' not followed by two hex digits.
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'%'
            && !bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
        {
            return None;
        }
    }
    percent_encoding::percent_decode_str(&text)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// KEDA's `parseMySQLDbNameFromConnectionStr`: everything after the last `/` of the string,
/// parameters included; it names the metric.
pub fn keda_db_name(connection_string: &str) -> &str {
    connection_string
        .rsplit('/')
        .next()
        .unwrap_or(connection_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dsns_parse_as_go_sql_driver_parses_them() {
        // The user info ends at the last '@' before the last '/': a password may hold both.
        let d = Dsn::parse("app:p@ss:w/rd@tcp(db:3306)/jobs").unwrap();
        assert_eq!((d.user.as_str(), d.password.as_str()), ("app", "p@ss:w/rd"));
        assert_eq!((d.net.as_str(), d.addr.as_str()), ("tcp", "db:3306"));

        let d = Dsn::parse(
            "app:s3cr@t@tcp(mysql.db.svc:3307)/jobs?tls=skip-verify&sql_mode=%27ANSI%27",
        )
        .unwrap();
        assert_eq!(
            d,
            Dsn {
                user: "app".into(),
                password: "s3cr@t".into(),
                net: "tcp".into(),
                addr: "mysql.db.svc:3307".into(),
                db_name: "jobs".into(),
                params: vec![
                    ("tls".into(), "skip-verify".into()),
                    ("sql_mode".into(), "'ANSI'".into())
                ],
            }
        );
        assert_eq!(d.host_port().unwrap(), ("mysql.db.svc".to_string(), 3307));

        let d = Dsn::parse("root@/test").unwrap();
        assert_eq!((d.user.as_str(), d.password.as_str()), ("root", ""));
        assert_eq!(d.host_port().unwrap(), ("127.0.0.1".to_string(), 3306));
        let d = Dsn::parse("/").unwrap();
        assert_eq!((d.net.as_str(), d.db_name.as_str()), ("tcp", ""));
        let d = Dsn::parse("u:p@tcp([::1]:3310)/my%20db").unwrap();
        assert_eq!(d.host_port().unwrap(), ("::1".to_string(), 3310));
        assert_eq!(d.db_name, "my db");
        let d = Dsn::parse("u:p@tcp(db)/x").unwrap();
        assert_eq!(d.host_port().unwrap(), ("db".to_string(), 3306));
    }

    #[test]
    fn malformed_dsns_are_described_without_their_values() {
        for dsn in [
            "u:s3cret@tcp(db:3306)",
            "u:s3cret@tcp(db:3306/x",
            "u:s3cret@tcp(db:33x6)/x",
            "u:s3cret@tcp(db)/x?tls",
            "u:s3cret@tcp(db)/x?a=%zz",
        ] {
            let err = Dsn::parse(dsn)
                .and_then(|d| d.host_port().map(drop))
                .unwrap_err();
            assert!(!err.contains("s3cret"), "{dsn}: {err}");
        }
    }

    #[test]
    fn the_metric_names_what_follows_the_last_slash_as_keda_does() {
        assert_eq!(keda_db_name("u:p@tcp(db:3306)/jobs"), "jobs");
        assert_eq!(
            keda_db_name("u:p@tcp(db:3306)/jobs?tls=true"),
            "jobs?tls=true"
        );
        assert_eq!(keda_db_name("u:p@tcp(db:3306)/"), "");
    }
}
