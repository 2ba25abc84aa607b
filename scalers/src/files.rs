//! Files named by trigger metadata (`external`'s `tlsCertFile`, postgresql's `sslrootcert`,
//! `sslcert`, `sslkey`): read only under the administrator's root, only regular files, with a
//! size cap, and never on the async runtime's threads.
//!
//! A trigger's metadata is written by a tenant of a namespace; the operator's file system is
//! the administrator's. KEDA reads any path the operator can read; keda-rs reads only under
//! [`TriggerFiles::root`] (`--trigger-file-root`, default [`DEFAULT_TRIGGER_FILE_ROOT`]; `/`
//! gives KEDA's behaviour back, still with the size cap and regular files only).

use std::io::Read;
use std::path::{Path, PathBuf};

/// The default root: where an administrator mounts the certificates triggers may name.
pub const DEFAULT_TRIGGER_FILE_ROOT: &str = "/etc/keda-rs/trigger-files";

/// The most of a file that is read; a larger file is refused.
pub const MAX_TRIGGER_FILE_BYTES: u64 = 1024 * 1024;

/// Linux's `O_NONBLOCK`: opening a FIFO must not wait for a writer.
#[cfg(target_os = "linux")]
const O_NONBLOCK: i32 = 0o4000;

/// Why a file named by a trigger is not read. Names the path, never content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileProblem {
    /// The path (after following links) is not under the root.
    #[error(
        "\"{path}\" is not under the trigger file root {} (the operator's --trigger-file-root): \
         ask the administrator to mount the file there",
        root.display()
    )]
    OutsideRoot {
        /// The path as written.
        path: String,
        /// The root.
        root: PathBuf,
    },
    /// The path cannot be resolved or opened.
    #[error("cannot read \"{path}\": {reason}")]
    Unreadable {
        /// The path as written.
        path: String,
        /// The kind of failure (no content).
        reason: String,
    },
    /// Not a regular file (a device, a FIFO, a directory, a socket).
    #[error("\"{path}\" is not a regular file")]
    NotRegular {
        /// The path as written.
        path: String,
    },
    /// Larger than [`MAX_TRIGGER_FILE_BYTES`].
    #[error("\"{path}\" is larger than {limit} bytes")]
    TooLarge {
        /// The path as written.
        path: String,
        /// The cap.
        limit: u64,
    },
    /// Not UTF-8 text.
    #[error("\"{path}\" is not UTF-8 text")]
    NotText {
        /// The path as written.
        path: String,
    },
}

/// Where trigger files may be read from. Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerFiles {
    root: PathBuf,
    limit: u64,
}

impl Default for TriggerFiles {
    fn default() -> Self {
        Self::new(DEFAULT_TRIGGER_FILE_ROOT)
    }
}

impl TriggerFiles {
    /// Files under `root` (`/`: any path), at most [`MAX_TRIGGER_FILE_BYTES`] each.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            limit: MAX_TRIGGER_FILE_BYTES,
        }
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The size cap.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Checks `path` without opening it: it resolves (links followed, `..` removed) to a
    /// regular file under the root. Blocking file-system calls (a few `stat`s); call it off
    /// the runtime or where the path is short-lived, as [`TriggerFiles::read`] does.
    ///
    /// # Errors
    /// [`FileProblem`] naming the path.
    pub fn check(&self, path: &str) -> Result<PathBuf, FileProblem> {
        let unreadable = |e: std::io::Error| FileProblem::Unreadable {
            path: path.to_string(),
            reason: e.kind().to_string(),
        };
        let outside = || FileProblem::OutsideRoot {
            path: path.to_string(),
            root: self.root.clone(),
        };
        let root = std::fs::canonicalize(&self.root).map_err(|_| outside())?;
        let resolved = std::fs::canonicalize(path).map_err(unreadable)?;
        if !resolved.starts_with(&root) {
            return Err(outside());
        }
        let meta = std::fs::metadata(&resolved).map_err(unreadable)?;
        if !meta.is_file() {
            return Err(FileProblem::NotRegular {
                path: path.to_string(),
            });
        }
        if meta.len() > self.limit {
            return Err(self.too_large(path));
        }
        Ok(resolved)
    }

    fn too_large(&self, path: &str) -> FileProblem {
        FileProblem::TooLarge {
            path: path.to_string(),
            limit: self.limit,
        }
    }

    /// Reads `path` as text, on a blocking thread: [`check`](Self::check), then opened without
    /// waiting (a FIFO swapped in meanwhile does not block), checked again as a regular file,
    /// and read to at most the cap.
    ///
    /// # Errors
    /// [`FileProblem`] naming the path.
    pub async fn read(&self, path: &str) -> Result<String, FileProblem> {
        let files = self.clone();
        let owned = path.to_string();
        tokio::task::spawn_blocking(move || files.read_blocking(&owned))
            .await
            .map_err(|e| FileProblem::Unreadable {
                path: path.to_string(),
                reason: e.to_string(),
            })?
    }

    /// [`read`](Self::read) on the calling thread.
    ///
    /// # Errors
    /// [`FileProblem`] naming the path.
    pub fn read_blocking(&self, path: &str) -> Result<String, FileProblem> {
        let resolved = self.check(path)?;
        let unreadable = |e: std::io::Error| FileProblem::Unreadable {
            path: path.to_string(),
            reason: e.kind().to_string(),
        };
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(O_NONBLOCK);
        }
        let file = options.open(&resolved).map_err(unreadable)?;
        if !file.metadata().map_err(unreadable)?.is_file() {
            return Err(FileProblem::NotRegular {
                path: path.to_string(),
            });
        }
        let mut bytes = Vec::new();
        file.take(self.limit + 1)
            .read_to_end(&mut bytes)
            .map_err(unreadable)?;
        if bytes.len() as u64 > self.limit {
            return Err(self.too_large(path));
        }
        String::from_utf8(bytes).map_err(|_| FileProblem::NotText {
            path: path.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("keda-rs-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    #[tokio::test]
    async fn only_regular_files_under_the_root_and_under_the_cap_are_read() {
        let root = dir("root");
        let outside = dir("outside");
        std::fs::write(root.join("ca.pem"), "CA").expect("write");
        std::fs::write(outside.join("secret"), "S").expect("write");
        std::fs::write(root.join("big"), vec![b'x'; 1024 * 1024 + 1]).expect("write");
        std::os::unix::fs::symlink(outside.join("secret"), root.join("link")).expect("link");
        let files = TriggerFiles::new(&root);
        let at = |name: &str| root.join(name).display().to_string();
        assert_eq!(files.read(&at("ca.pem")).await.as_deref(), Ok("CA"));
        // (path, refusal): a comment per row.
        for (path, want) in [
            // a file elsewhere
            (outside.join("secret").display().to_string(), "not under"),
            // `..` out of the root
            (
                format!(
                    "{}/../{}/secret",
                    root.display(),
                    outside
                        .file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or_default()
                ),
                "not under",
            ),
            // a link out of the root
            (at("link"), "not under"),
            // a device
            ("/dev/zero".to_string(), "not under"),
            // past the cap
            (at("big"), "larger than 1048576 bytes"),
            // missing
            (at("missing"), "cannot read"),
        ] {
            let error = files.read(&path).await.expect_err(&path).to_string();
            assert!(error.contains(want), "{path}: {error}");
        }
        let any = TriggerFiles::new("/");
        assert!(matches!(
            any.read("/dev/zero").await,
            Err(FileProblem::NotRegular { .. })
        ));
        assert_eq!(
            any.read(&outside.join("secret").display().to_string())
                .await
                .as_deref(),
            Ok("S")
        );
        let _ = std::fs::remove_dir_all(root);
        let _ = std::fs::remove_dir_all(outside);
    }

    #[tokio::test]
    async fn a_fifo_under_the_root_is_refused_without_waiting_for_a_writer() {
        let root = dir("fifo");
        let fifo = root.join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        let files = TriggerFiles::new(&root);
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            files.read(&fifo.display().to_string()),
        )
        .await
        .expect("answers at once");
        assert!(
            matches!(read, Err(FileProblem::NotRegular { .. })),
            "{read:?}"
        );
        let _ = std::fs::remove_dir_all(root);
    }
}
