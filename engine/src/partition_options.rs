//! A partition's own settings ([`PartitionOptions`]), kept in its directory
//! (`options.json`) so they hold across restarts.

use corelog_segment::log::{FsyncPolicy, LogConfig, Retention};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// The file in a partition's directory that holds its options.
pub(crate) const OPTIONS_FILE: &str = "options.json";

/// What one partition sets for itself, over the engine's [`LogConfig`]:
/// unset fields follow the engine's. Given to
/// [`Handle::create_partition_with`](crate::Handle::create_partition_with),
/// kept in the partition's directory and read back whenever it opens.
///
/// ```
/// use corelog::{FsyncPolicy, PartitionOptions, Retention};
/// use std::time::Duration;
/// let options = PartitionOptions::new()
///     .segment_bytes(64 << 20)
///     .fsync(FsyncPolicy::Batch)
///     .retention(Retention { max_age: Some(Duration::from_secs(7 * 86_400)), max_bytes: None });
/// assert_eq!(options.segment_bytes, Some(64 << 20));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionOptions {
    /// Segment file size (the engine's `LogConfig::segment_bytes` if unset).
    pub segment_bytes: Option<u64>,
    /// When appends are acknowledged against durability (the engine's
    /// `LogConfig::fsync` if unset).
    pub fsync: Option<FsyncPolicy>,
    /// Which sealed segments retention deletes (the engine's
    /// `LogConfig::retention` if unset).
    pub retention: Option<Retention>,
}

/// Why a partition's `options.json` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct OptionsError {
    /// the field (or "the file")
    pub field: &'static str,
    /// what is wrong with it
    pub why: &'static str,
}

impl PartitionOptions {
    /// No option set: the engine's settings.
    pub fn new() -> PartitionOptions {
        PartitionOptions::default()
    }

    /// Sets the segment file size.
    pub fn segment_bytes(mut self, bytes: u64) -> PartitionOptions {
        self.segment_bytes = Some(bytes);
        self
    }

    /// Sets the fsync policy.
    pub fn fsync(mut self, policy: FsyncPolicy) -> PartitionOptions {
        self.fsync = Some(policy);
        self
    }

    /// Sets the retention limits.
    pub fn retention(mut self, retention: Retention) -> PartitionOptions {
        self.retention = Some(retention);
        self
    }

    /// The engine's log settings with these over them.
    pub(crate) fn apply(&self, base: &LogConfig) -> LogConfig {
        let mut config = base.clone();
        if let Some(b) = self.segment_bytes {
            config.segment_bytes = b;
        }
        if let Some(f) = self.fsync {
            config.fsync = f;
        }
        if let Some(r) = self.retention {
            config.retention = r;
        }
        config
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut m = Map::new();
        m.insert("version".into(), json!(1));
        if let Some(b) = self.segment_bytes {
            m.insert("segment_bytes".into(), json!(b));
        }
        if let Some(f) = self.fsync {
            m.insert("fsync".into(), json!(f.to_string()));
        }
        if let Some(r) = self.retention {
            let secs = r.max_age.map(|d| d.as_secs_f64());
            m.insert(
                "retention".into(),
                json!({ "max_age_seconds": secs, "max_bytes": r.max_bytes }),
            );
        }
        let mut out = serde_json::to_vec_pretty(&Value::Object(m)).unwrap_or_default();
        out.push(b'\n');
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<PartitionOptions, OptionsError> {
        let bad = |field, why| OptionsError { field, why };
        let v: Value = serde_json::from_slice(bytes).map_err(|_| bad("the file", "not JSON"))?;
        let m = v.as_object().ok_or(bad("the file", "not a JSON object"))?;
        if m.get("version").and_then(Value::as_u64) != Some(1) {
            return Err(bad("version", "missing or not 1"));
        }
        let u64_of = |field, v: &Value| v.as_u64().ok_or(bad(field, "not a whole number"));
        let mut o = PartitionOptions::new();
        if let Some(v) = m.get("segment_bytes") {
            o.segment_bytes = Some(u64_of("segment_bytes", v).and_then(|b| match b {
                0 => Err(bad("segment_bytes", "zero")),
                b => Ok(b),
            })?);
        }
        if let Some(v) = m.get("fsync") {
            let s = v.as_str().ok_or(bad("fsync", "not a string"))?;
            o.fsync = Some(
                s.parse()
                    .map_err(|_| bad("fsync", "not never, batch or interval:MS"))?,
            );
        }
        if let Some(r) = m.get("retention") {
            let age = match r.get("max_age_seconds") {
                None | Some(Value::Null) => None,
                Some(v) => {
                    let s = v.as_f64().filter(|s| s.is_finite() && *s >= 0.0);
                    let s = s.ok_or(bad("retention.max_age_seconds", "not a number of seconds"))?;
                    Some(Duration::from_secs_f64(s))
                }
            };
            let max_bytes = match r.get("max_bytes") {
                None | Some(Value::Null) => None,
                Some(v) => Some(u64_of("retention.max_bytes", v)?),
            };
            o.retention = Some(Retention {
                max_age: age,
                max_bytes,
            });
        }
        Ok(o)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_and_damage_is_named() {
        let all = PartitionOptions::new()
            .segment_bytes(1 << 20)
            .fsync(FsyncPolicy::Interval(Duration::from_millis(50)))
            .retention(Retention {
                max_age: Some(Duration::from_secs(3600)),
                max_bytes: Some(1 << 30),
            });
        for o in [all, PartitionOptions::new()] {
            assert_eq!(PartitionOptions::decode(&o.encode()), Ok(o));
        }
        let e = |s: &str| PartitionOptions::decode(s.as_bytes()).unwrap_err().field;
        assert_eq!(e("{"), "the file");
        assert_eq!(e("{}"), "version");
        assert_eq!(e(r#"{"version":1,"segment_bytes":0}"#), "segment_bytes");
        assert_eq!(e(r#"{"version":1,"fsync":"sometimes"}"#), "fsync");
        assert_eq!(
            e(r#"{"version":1,"retention":{"max_age_seconds":-1}}"#),
            "retention.max_age_seconds"
        );
    }
}
