//! Where a `clickhouse` trigger's queries go: a `clickhouse-go` DSN
//! (`clickhouse://user:password@host:9000/database?secure=true&skip_verify=true&<setting>=<value>`,
//! as `clickhouse-go`'s `ParseDSN` reads it) or KEDA's `host`, `port`, `username`, `password`
//! and `database`.

use crate::error::MetadataError;
use crate::metadata::{MetadataParser, Param};
use crate::secret::Secret;

/// The options of `clickhouse-go`'s DSN that configure the Go driver itself (its pool,
/// compression, timeouts, proxy, logging): read or dropped, never sent as settings.
const DRIVER_OPTIONS: &[&str] = &[
    "debug",
    "compress",
    "compress_level",
    "max_compression_buffer",
    "dial_timeout",
    "block_buffer_size",
    "read_timeout",
    "tls_server_name",
    "connection_open_strategy",
    "max_open_conns",
    "max_idle_conns",
    "conn_max_lifetime",
    "client_info_product",
    "http_proxy",
];

/// Query parameters of the HTTP interface that keda-rs sets itself (the request's database
/// and format, the credentials in Basic authentication): a DSN setting of that name is
/// dropped.
const RESERVED: &[&str] = &[
    "query",
    "database",
    "default_format",
    "user",
    "password",
    "quota_key",
];

/// How the server is spoken to according to the DSN's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `clickhouse://` or `tcp://` (any scheme but http and https, as in `clickhouse-go`): the
    /// native protocol's port, if given.
    Native(Option<u16>),
    /// `http://` or `https://`: the HTTP interface itself.
    Http {
        /// `https://`.
        https: bool,
        /// The port, if given.
        port: Option<u16>,
    },
}

/// The parsed connection.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The parameter the connection came from (for messages): `connectionString` or `port`.
    pub param: &'static str,
    /// The first host (`clickhouse-go` tries the others in turn when it cannot connect; keda-rs
    /// reads from the first one).
    pub host: String,
    /// How the server is spoken to.
    pub endpoint: Endpoint,
    /// The user (`default` when none is given, as in `clickhouse-go`).
    pub username: String,
    /// The password (empty when none is given).
    pub password: Secret,
    /// The database; empty for the user's default one.
    pub database: String,
    /// `secure`: TLS.
    pub secure: bool,
    /// `skip_verify`: no certificate verification.
    pub skip_verify: bool,
    /// `http_path`: the path of the HTTP interface (`/` by default).
    pub http_path: String,
    /// The other options: ClickHouse settings, sent as query parameters (`true`/`false` as
    /// `1`/`0`, as `clickhouse-go` sends them).
    pub settings: Vec<(String, String)>,
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// `host` or `host:port` or `[v6]:port`.
fn host_port(
    p: &MetadataParser<'_>,
    param: &Param,
    text: &str,
) -> Result<(String, Option<u16>), MetadataError> {
    let bad_port = || {
        p.rule(format!(
            "parameter \"{}\": the port is not a number from 1 to 65535",
            param.name
        ))
    };
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(|| {
            p.rule(format!(
                "parameter \"{}\": an IPv6 host lacks its closing ]",
                param.name
            ))
        })?;
        match after.strip_prefix(':') {
            Some(port) => (host.to_string(), Some(port)),
            None if after.is_empty() => (host.to_string(), None),
            None => return Err(bad_port()),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (text.to_string(), None),
        }
    };
    let port = match port {
        None => None,
        Some(port) => Some(
            port.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(bad_port)?,
        ),
    };
    if host.is_empty() {
        return Err(p.rule(format!("parameter \"{}\" has no host", param.name)));
    }
    Ok((host, port))
}

fn flag(
    p: &MetadataParser<'_>,
    param: &Param,
    name: &str,
    value: &str,
) -> Result<bool, MetadataError> {
    if value.is_empty() {
        return Ok(true);
    }
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(p.rule(format!(
            "parameter \"{}\": option {name} is not true or false",
            param.name
        ))),
    }
}

/// Parses a `clickhouse-go` DSN given in `param`.
///
/// # Errors
/// No `scheme://`, no host, a port that is not a number, `secure` or `skip_verify` not a
/// boolean. Messages name `param` and never quote the DSN (it holds the password).
pub fn parse(p: &MetadataParser<'_>, param: &Param, dsn: &str) -> Result<Target, MetadataError> {
    let (scheme, rest) = dsn.trim().split_once("://").ok_or_else(|| {
        p.rule(format!(
            "parameter \"{}\" is not a DSN (clickhouse://user:password@host:9000/database?options)",
            param.name
        ))
    })?;
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let first = hosts.split(',').map(str::trim).find(|h| !h.is_empty());
    let Some(first) = first else {
        return Err(p.rule(format!("parameter \"{}\" has no host", param.name)));
    };
    let (host, port) = host_port(p, param, first)?;
    let endpoint = match scheme.to_ascii_lowercase().as_str() {
        "http" => Endpoint::Http { https: false, port },
        "https" => Endpoint::Http { https: true, port },
        _ => Endpoint::Native(port),
    };
    let (mut username, mut password) = match userinfo {
        None => (String::new(), String::new()),
        Some(info) => match info.split_once(':') {
            Some((user, pass)) => (decode(user), decode(pass)),
            None => (decode(info), String::new()),
        },
    };
    let mut database = decode(path.trim_start_matches('/'));
    let mut target = Target {
        param: param.name,
        host,
        endpoint,
        username: String::new(),
        password: Secret::new(""),
        database: String::new(),
        secure: matches!(endpoint, Endpoint::Http { https: true, .. }),
        skip_verify: false,
        http_path: "/".into(),
        settings: Vec::new(),
    };
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match name.as_ref() {
            "secure" => target.secure |= flag(p, param, "secure", &value)?,
            "skip_verify" => target.skip_verify = flag(p, param, "skip_verify", &value)?,
            "username" => username = value.into_owned(),
            "password" => password = value.into_owned(),
            "database" => database = value.into_owned(),
            "http_path" => {
                target.http_path = if value.starts_with('/') {
                    value.into_owned()
                } else {
                    format!("/{value}")
                };
            }
            other if DRIVER_OPTIONS.contains(&other) || RESERVED.contains(&other) => {}
            other => {
                let value = match value.to_ascii_lowercase().as_str() {
                    "true" => "1".to_string(),
                    "false" => "0".to_string(),
                    _ => value.into_owned(),
                };
                target.settings.push((other.to_string(), value));
            }
        }
    }
    target.username = if username.is_empty() {
        "default".into()
    } else {
        username
    };
    target.password = Secret::new(password);
    target.database = database;
    Ok(target)
}

/// The connection of KEDA's `host`, `port` (native), `username`, `password` and `database`
/// (their defaults already applied).
///
/// # Errors
/// A `host` with a scheme or a path, a `port` that is not a number.
pub fn from_parts(
    p: &MetadataParser<'_>,
    host: &str,
    port: &str,
    username: String,
    password: Secret,
    database: String,
) -> Result<Target, MetadataError> {
    if host.contains('/') || host.contains('@') {
        return Err(p.rule(
            "parameter \"host\" must be a host name or address, without scheme, credentials or path",
        ));
    }
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| p.rule("parameter \"port\" is not a number from 1 to 65535"))?;
    Ok(Target {
        param: "port",
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        endpoint: Endpoint::Native(Some(port)),
        username,
        password,
        database,
        secure: false,
        skip_verify: false,
        http_path: "/".into(),
        settings: Vec::new(),
    })
}
