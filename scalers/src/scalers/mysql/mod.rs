//! `mysql`: scales on the number a SQL query returns from MySQL or MariaDB. Compatible with
//! KEDA's `mysql` trigger (`pkg/scalers/mysql_scaler.go`): a Go DSN in `connectionString`, or
//! `host`, `port`, `username`, `password`, `dbName`; the metric is named after the database as
//! KEDA names it.
//!
//! Triggers with the same connection settings share one pool of connections (at most
//! [`DEFAULT_POOL_SIZE`]), opened on demand.

pub mod dsn;

use std::future::Future;
use std::time::Duration;

use mysql_async::consts::ColumnType;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Pool, PoolConstraints, PoolOpts, SslOpts, Value};

use self::dsn::{Dsn, keda_db_name};
use super::sql::{
    self, Answer, CONNECT_TIMEOUT, DEFAULT_POOL_SIZE, QueryFailure, SqlDatabase, SqlQueryConfig,
    SqlScaler, target_value,
};
use crate::context::ScalerContext;
use crate::error::ScalerError;
use crate::metadata::{AUTH_ENV, METADATA_AUTH, METADATA_AUTH_ENV, Param};
use crate::remote::Failure;
use crate::scaler::BuiltScaler;
use crate::secret::Secret;

const CONNECTION_STRING: Param = Param::optional("connectionString").order(AUTH_ENV).secret();
const USERNAME: Param = Param::optional("username").order(METADATA_AUTH_ENV);
const PASSWORD: Param = Param::optional("password").order(AUTH_ENV).secret();
const HOST: Param = Param::optional("host").order(METADATA_AUTH);
const PORT: Param = Param::optional("port").order(METADATA_AUTH);
const DB_NAME: Param = Param::optional("dbName").order(METADATA_AUTH);
const QUERY: Param = Param::required("query");
const QUERY_VALUE: Param = Param::optional("queryValue");
const ACTIVATION_QUERY_VALUE: Param = Param::optional("activationQueryValue").default("0");
/// Parsed by KEDA and then overwritten: accepted and ignored.
const METRIC_NAME: Param = Param::optional("metricName");

/// Every parameter of the `mysql` trigger.
pub const PARAMS: &[Param] = &[
    CONNECTION_STRING,
    HOST,
    PORT,
    USERNAME,
    PASSWORD,
    DB_NAME,
    QUERY,
    QUERY_VALUE,
    ACTIVATION_QUERY_VALUE,
    METRIC_NAME,
];

/// Parameters of go-sql-driver that configure the Go client itself: ignored. Any other
/// parameter is a system variable set on each new connection (`SET <name>=<value>`), as the
/// Go driver does.
const IGNORED_PARAMS: &[&str] = &[
    "allowAllFiles",
    "allowFallbackToPlaintext",
    "allowNativePasswords",
    "allowOldPasswords",
    "charset",
    "checkConnLiveness",
    "clientFoundRows",
    "collation",
    "columnsWithAlias",
    "compress",
    "connectionAttributes",
    "interpolateParams",
    "loc",
    "maxAllowedPacket",
    "multiStatements",
    "parseTime",
    "readTimeout",
    "rejectReadOnly",
    "serverPubKey",
    "strict",
    "timeTruncate",
    "timeout",
    "writeTimeout",
];

/// go-sql-driver's `tls` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tls {
    /// No TLS (`false`, the default).
    Off,
    /// TLS, certificate verified against the Mozilla roots (`true`).
    Verified,
    /// TLS, certificate not verified (`skip-verify`).
    Unverified,
    /// TLS without verification if the server offers it, else plain (`preferred`).
    Preferred,
}

/// Where to connect and how.
#[derive(Clone, Debug)]
pub struct MySqlSettings {
    /// The settings as one DSN string: what pools are shared by.
    pub key: Secret,
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// User.
    pub user: String,
    /// Password (may be empty).
    pub password: Secret,
    /// Database, if any.
    pub db_name: String,
    /// TLS.
    pub tls: Tls,
    /// `allowCleartextPasswords`.
    pub cleartext_passwords: bool,
    /// `SET` statements for the DSN's system variables.
    pub init: Vec<String>,
    /// `MySQL at host:port/db`, for messages.
    pub server: String,
}

impl MySqlSettings {
    /// Reads a DSN.
    ///
    /// # Errors
    /// What is malformed or unsupported, without values.
    pub fn from_dsn(text: &str) -> Result<Self, String> {
        let dsn = Dsn::parse(text)?;
        if dsn.net != "tcp" && dsn.net != "tcp4" && dsn.net != "tcp6" {
            return Err(format!(
                "network \"{}\" is not supported; use tcp(host:port)",
                dsn.net
            ));
        }
        let (host, port) = dsn.host_port()?;
        let mut tls = Tls::Off;
        let mut cleartext_passwords = false;
        let mut init = Vec::new();
        for (key, value) in &dsn.params {
            match key.as_str() {
                "tls" => {
                    tls = match value.as_str() {
                        "true" | "1" | "t" | "T" | "TRUE" | "True" => Tls::Verified,
                        "false" | "0" | "f" | "F" | "FALSE" | "False" => Tls::Off,
                        "skip-verify" => Tls::Unverified,
                        "preferred" => Tls::Preferred,
                        _ => {
                            return Err(
                                "tls must be true, false, skip-verify or preferred (TLS configurations registered in Go code do not exist here)"
                                    .to_string(),
                            );
                        }
                    }
                }
                "allowCleartextPasswords" => {
                    cleartext_passwords = matches!(value.as_str(), "true" | "1");
                }
                key if IGNORED_PARAMS.contains(&key) => {}
                key => {
                    if !key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '@')
                    {
                        return Err(format!("parameter \"{key}\" is not a system variable name"));
                    }
                    init.push(format!("SET {key}={value}"));
                }
            }
        }
        Ok(Self {
            key: Secret::new(text),
            server: describe(&host, port, &dsn.db_name),
            host,
            port,
            user: dsn.user,
            password: Secret::new(dsn.password),
            db_name: dsn.db_name,
            tls,
            cleartext_passwords,
            init,
        })
    }

    /// KEDA's DSN from separate parameters (`tcp`, no TLS).
    pub fn from_parts(
        host: String,
        port: u16,
        user: String,
        password: Secret,
        db_name: String,
    ) -> Self {
        Self {
            key: Secret::new(format!(
                "{user}:{}@tcp({host}:{port})/{db_name}",
                password.expose()
            )),
            server: describe(&host, port, &db_name),
            host,
            port,
            user,
            password,
            db_name,
            tls: Tls::Off,
            cleartext_passwords: false,
            init: Vec::new(),
        }
    }

    fn options(&self, tls: Tls) -> OptsBuilder {
        let ssl = match tls {
            Tls::Off => None,
            Tls::Verified => Some(SslOpts::default()),
            Tls::Unverified | Tls::Preferred => {
                Some(SslOpts::default().with_danger_accept_invalid_certs(true))
            }
        };
        let constraints = PoolConstraints::new(0, DEFAULT_POOL_SIZE).unwrap_or_default();
        OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port)
            .user(Some(self.user.clone()))
            .pass(Some(self.password.expose().to_string()))
            .db_name((!self.db_name.is_empty()).then(|| self.db_name.clone()))
            .ssl_opts(ssl)
            // The Go driver never switches to the server's Unix socket; neither do we.
            .prefer_socket(false)
            .enable_cleartext_plugin(self.cleartext_passwords)
            .init(self.init.clone())
            .pool_opts(PoolOpts::default().with_constraints(constraints))
    }

    /// With `preferred` TLS, a server that offers none is connected to in plain text.
    async fn open(&self) -> Result<MySqlPool, Failure> {
        let attempt = |tls| async move {
            let pool = Pool::new(self.options(tls));
            let conn = tokio::time::timeout(CONNECT_TIMEOUT, pool.get_conn())
                .await
                .map_err(|_| {
                    mysql_async::Error::Other(
                        format!("no connection within {CONNECT_TIMEOUT:?}").into(),
                    )
                })??;
            drop(conn);
            Ok::<_, mysql_async::Error>(MySqlPool { pool })
        };
        match attempt(self.tls).await {
            Err(mysql_async::Error::Driver(
                mysql_async::DriverError::NoClientSslFlagFromServer,
            )) if self.tls == Tls::Preferred => attempt(Tls::Off).await,
            other => other,
        }
        .map_err(|e| match e {
            mysql_async::Error::Other(_) => {
                Failure::local(format!("no connection within {CONNECT_TIMEOUT:?}"))
            }
            e => {
                let secrets = self.secrets();
                Failure::of_scrubbed("MySQL", &e, |raw| {
                    crate::scalers::rabbitmq::url::anonymize(raw, &secrets)
                })
            }
        })
    }
}

fn describe(host: &str, port: u16, db_name: &str) -> String {
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    format!("MySQL at {host}:{port}/{db_name}")
}

/// A pool of connections with one DSN, shared by triggers. Disconnected when the last trigger
/// lets go of it.
pub struct MySqlPool {
    pool: Pool,
}

impl Drop for MySqlPool {
    fn drop(&mut self) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let pool = self.pool.clone();
            runtime.spawn(async move {
                let _ = pool.disconnect().await;
            });
        }
    }
}

/// The parsed `mysql` trigger; its metric is `s<index>-mysql-<dbName>`, the name taken from
/// the connection string as KEDA takes it.
pub type MySqlConfig = SqlQueryConfig<MySqlSettings>;

/// A `mysql` scaler.
pub type MySqlScaler = SqlScaler<MySqlSettings>;

impl SqlDatabase for MySqlSettings {
    type Pool = MySqlPool;

    fn parse(ctx: &ScalerContext) -> Result<MySqlConfig, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let (settings, db_for_metric, connection_params) = match p
                .get_opt::<Secret>(&CONNECTION_STRING)?
            {
                Some(dsn) => {
                    let settings = MySqlSettings::from_dsn(dsn.expose())
                        .map_err(|why| p.rule(format!("parameter \"connectionString\": {why}")))?;
                    (
                        settings,
                        keda_db_name(dsn.expose()).to_string(),
                        "parameter \"connectionString\"",
                    )
                }
                None => {
                    let db_name: String = p.get_opt(&DB_NAME)?.unwrap_or_default();
                    let settings = MySqlSettings::from_parts(
                        p.get(&HOST.require())?,
                        p.get(&PORT.require())?,
                        p.get_opt(&USERNAME)?.unwrap_or_default(),
                        p.get_opt(&PASSWORD)?.unwrap_or_default(),
                        db_name.clone(),
                    );
                    (
                        settings,
                        db_name,
                        "parameters \"host\", \"port\", \"username\", \"password\", \"dbName\"",
                    )
                }
            };
            let _: Option<String> = p.get_opt(&METRIC_NAME)?;
            Ok(SqlQueryConfig {
                database: settings,
                connection_params,
                query: p.get(&QUERY)?,
                target: target_value(p, &QUERY_VALUE, ctx.as_metric_source)?,
                activation: p.get(&ACTIVATION_QUERY_VALUE)?,
                metric_name: ctx.metric_name(&format!("mysql-{db_for_metric}")),
                metric_type,
            })
        })?)
    }

    fn key(&self) -> Secret {
        self.key.clone()
    }

    fn server(&self) -> &str {
        &self.server
    }

    fn secrets(&self) -> Vec<&str> {
        vec![self.password.expose()]
    }

    fn connect(&self) -> impl Future<Output = Result<MySqlPool, Failure>> + Send {
        self.open()
    }

    async fn query(
        pool: &MySqlPool,
        query: &str,
        timeout: Duration,
    ) -> Result<Answer, QueryFailure> {
        let failed = |e: mysql_async::Error| QueryFailure::Failed(Box::new(e));
        let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, pool.pool.get_conn())
            .await
            .map_err(|_| {
                QueryFailure::Failed(format!("no connection within {CONNECT_TIMEOUT:?}").into())
            })?
            .map_err(failed)?;
        match tokio::time::timeout(timeout, first_answer(&mut conn, query)).await {
            Ok(answer) => answer.map_err(failed),
            Err(_) => {
                // Stop the statement on the server from another connection; the pool then
                // reads what is left of the interrupted one before it lends it again.
                let id = conn.id();
                let kill = async {
                    let mut other = pool.pool.get_conn().await?;
                    other.query_drop(format!("KILL QUERY {id}")).await
                };
                let _ = tokio::time::timeout(CONNECT_TIMEOUT, kill).await;
                drop(conn);
                Err(QueryFailure::TimedOut)
            }
        }
    }
}

/// Runs `query` and reads its first row.
async fn first_answer(conn: &mut Conn, query: &str) -> Result<Answer, mysql_async::Error> {
    let mut result = conn.query_iter(query).await?;
    let row = result.next().await?;
    // The rest of the rows (and result sets) are read and discarded.
    result.drop_result().await?;
    let Some(row) = row else {
        return Ok(Answer::NoRow);
    };
    if row.len() != 1 {
        return Ok(Answer::Columns(row.len()));
    }
    let column = row
        .columns_ref()
        .first()
        .map(|c| (c.name_str().into_owned(), c.column_type()));
    let (name, column_type) =
        column.unwrap_or_else(|| (String::new(), ColumnType::MYSQL_TYPE_NULL));
    let not_a_number = |what: String| Answer::NotANumber {
        column: name.clone(),
        what,
    };
    Ok(match row.as_ref(0) {
        None | Some(Value::NULL) => Answer::Null,
        // Rounds to the nearest float above 2^53, as Go's float64 conversion does.
        Some(Value::Int(n)) => Answer::Number(*n as f64),
        Some(Value::UInt(n)) => Answer::Number(*n as f64),
        Some(Value::Float(n)) => Answer::Number(f64::from(*n)),
        Some(Value::Double(n)) => Answer::Number(*n),
        // The text protocol sends every value as text; Go's database/sql parses it into a
        // float whatever the column's type, so numbers kept in a text column work too.
        Some(Value::Bytes(bytes)) => match std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| text.parse::<f64>().ok())
        {
            Some(n) => Answer::Number(n),
            None => not_a_number(format!(
                "of type {} holding a non-numeric value",
                type_name(column_type)
            )),
        },
        Some(Value::Date(..) | Value::Time(..)) => {
            not_a_number(format!("of type {}", type_name(column_type)))
        }
    })
}

/// `VARCHAR` for `MYSQL_TYPE_VARCHAR`.
fn type_name(column_type: ColumnType) -> String {
    let name = format!("{column_type:?}");
    name.strip_prefix("MYSQL_TYPE_")
        .unwrap_or(&name)
        .to_string()
}

/// Factory of `mysql`.
///
/// # Errors
/// See [`SqlScaler::build`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    sql::build::<MySqlSettings>(ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::metric_target_milli;

    fn ctx(
        metadata: &[(&str, &str)],
        env: &[(&str, &str)],
        auth: &[(&str, &str)],
    ) -> ScalerContext {
        crate::context::test_context("mysql", 2, metadata, env, auth)
    }

    const QUERY_META: &[(&str, &str)] = &[("query", "SELECT 1"), ("queryValue", "1.5")];

    #[test]
    fn the_metric_is_named_after_the_database_as_keda_names_it() {
        // (connection string or parts, metric name)
        let from_dsn = |dsn: &str| {
            MySqlSettings::parse(&ctx(QUERY_META, &[], &[("connectionString", dsn)]))
                .unwrap()
                .metric_name
        };
        assert_eq!(from_dsn("u:p@tcp(db:3306)/stats"), "s2-mysql-stats");
        // KEDA keeps the parameters in the name (and normalizes '.', ':' ...).
        assert_eq!(
            from_dsn("u:p@tcp(db:3306)/stats?tls=skip-verify&time_zone=%27%2B00:00%27"),
            "s2-mysql-stats?tls=skip-verify&time_zone=-27-2B00-00-27"
        );
        let parts = MySqlSettings::parse(&ctx(
            &[
                QUERY_META,
                &[
                    ("host", "db"),
                    ("port", "3307"),
                    ("username", "u"),
                    ("dbName", "jobs.v1"),
                ],
            ]
            .concat(),
            &[],
            &[("password", "p")],
        ))
        .unwrap();
        assert_eq!(parts.metric_name, "s2-mysql-jobs-v1");
        assert_eq!(parts.database.server, "MySQL at db:3307/jobs.v1");
        assert_eq!(parts.database.password.expose(), "p");
        let target = metric_target_milli(parts.metric_type, parts.target);
        assert_eq!(target.average_value.map(|q| q.0), Some("1500m".to_string()));
    }

    #[test]
    fn dsn_parameters_set_tls_and_system_variables() {
        let s = MySqlSettings::from_dsn(
            "u:p@tcp(db)/x?tls=preferred&sql_mode=%27ANSI%27&parseTime=true&allowCleartextPasswords=1",
        )
        .unwrap();
        assert_eq!(s.tls, Tls::Preferred);
        assert!(s.cleartext_passwords);
        assert_eq!(s.init, ["SET sql_mode='ANSI'"]);
        assert_eq!((s.host.as_str(), s.port), ("db", 3306));
    }

    #[test]
    fn bad_input_names_the_parameter_and_hides_the_password() {
        type Row<'a> = (Vec<(&'a str, &'a str)>, Vec<(&'a str, &'a str)>, &'a str);
        let rows: Vec<Row<'_>> = vec![
            (
                vec![("queryValue", "1")],
                vec![("connectionString", "u:s3cret@tcp(db)/x")],
                r#"trigger 2 (mysql): missing required parameter "query""#,
            ),
            (
                vec![("query", "SELECT 1")],
                vec![("connectionString", "u:s3cret@tcp(db)/x")],
                r#"trigger 2 (mysql): missing required parameter "queryValue""#,
            ),
            (
                QUERY_META.to_vec(),
                vec![("connectionString", "u:s3cret@tcp(db)")],
                "trigger 2 (mysql): parameter \"connectionString\": it has no \"/\" before the database name (write user:password@tcp(host:3306)/dbname)",
            ),
            (
                QUERY_META.to_vec(),
                vec![("connectionString", "u:s3cret@unix(/run/mysqld.sock)/x")],
                "trigger 2 (mysql): parameter \"connectionString\": network \"unix\" is not supported; use tcp(host:port)",
            ),
            (
                QUERY_META.to_vec(),
                vec![("connectionString", "u:s3cret@tcp(db)/x?tls=custom")],
                "trigger 2 (mysql): parameter \"connectionString\": tls must be true, false, skip-verify or preferred (TLS configurations registered in Go code do not exist here)",
            ),
            (
                [QUERY_META, &[("port", "3306")]].concat(),
                vec![("password", "s3cret")],
                r#"trigger 2 (mysql): missing required parameter "host""#,
            ),
            (
                [QUERY_META, &[("host", "db"), ("port", "x")]].concat(),
                vec![],
                r#"trigger 2 (mysql): parameter "port": "x" is not a valid integer"#,
            ),
        ];
        for (metadata, auth, expected) in rows {
            let err = MySqlSettings::parse(&ctx(&metadata, &[], &auth)).unwrap_err();
            assert_eq!(err.to_string(), expected);
            assert!(!err.to_string().contains("s3cret"));
        }
    }

    #[test]
    fn credentials_come_from_env_and_auth() {
        let c = MySqlSettings::parse(&ctx(
            &[
                QUERY_META,
                &[
                    ("host", "db"),
                    ("port", "3306"),
                    ("usernameFromEnv", "USER"),
                    ("passwordFromEnv", "PASS"),
                ],
            ]
            .concat(),
            &[("USER", "app"), ("PASS", "pw")],
            &[],
        ))
        .unwrap();
        assert_eq!(c.database.user, "app");
        assert_eq!(c.database.password.expose(), "pw");
        let from_env = MySqlSettings::parse(&ctx(
            &[QUERY_META, &[("connectionStringFromEnv", "DSN")]].concat(),
            &[("DSN", "a:b@tcp(db:1)/z")],
            &[],
        ))
        .unwrap();
        assert_eq!(from_env.database.port, 1);
    }
}
