//! TensorFlow device names: `/job:localhost/replica:0/task:0/device:CPU:0` in full, or
//! partial specs (`/device:CPU:1`, `/cpu:0`, `/job:worker/task:3`, `/device:CPU:*`).
//! [`DeviceName`] parses both, prints the canonical form, tests whether a full name
//! satisfies a partial one, and merges two constraints (for colocation).

use std::fmt;

use crate::{Result, Status};

/// A full or partial device name; `None` fields are unconstrained.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct DeviceName {
    /// Job name.
    pub job: Option<String>,
    /// Replica index.
    pub replica: Option<u32>,
    /// Task index.
    pub task: Option<u32>,
    /// Device type, upper case (`CPU`, `GPU`).
    pub device_type: Option<String>,
    /// Device index within its type.
    pub id: Option<u32>,
}

fn bad(s: &str, why: &str) -> Status {
    Status::invalid_argument(format!("malformed device specification '{s}': {why}"))
}

fn parse_index(s: &str, v: &str) -> Result<Option<u32>> {
    if v == "*" {
        return Ok(None);
    }
    v.parse::<u32>()
        .map(Some)
        .map_err(|_| bad(s, &format!("'{v}' is not an index")))
}

impl DeviceName {
    /// The local CPU device `index` of the `localhost` job.
    pub fn local_cpu(index: u32) -> DeviceName {
        DeviceName::local("CPU", index)
    }

    /// Device `index` of `device_type` in `/job:localhost/replica:0/task:0`.
    pub fn local(device_type: &str, index: u32) -> DeviceName {
        DeviceName {
            job: Some("localhost".into()),
            replica: Some(0),
            task: Some(0),
            device_type: Some(device_type.to_ascii_uppercase()),
            id: Some(index),
        }
    }

    /// Parses a full or partial name; the empty string is the unconstrained spec.
    pub fn parse(s: &str) -> Result<DeviceName> {
        let mut d = DeviceName::default();
        let t = s.trim();
        if t.is_empty() {
            return Ok(d);
        }
        let body = t.strip_prefix('/').unwrap_or(t);
        let parts: Vec<&str> = body.split('/').collect();
        let mut i = 0;
        while i < parts.len() {
            let p = parts[i];
            let (k, v) = p
                .split_once(':')
                .ok_or_else(|| bad(s, &format!("'{p}' has no ':'")))?;
            match k {
                "job" => {
                    if v.is_empty() {
                        return Err(bad(s, "empty job"));
                    }
                    if v != "*" {
                        d.job = Some(v.to_owned());
                    }
                }
                "replica" => d.replica = parse_index(s, v)?,
                "task" => d.task = parse_index(s, v)?,
                "device" => {
                    // device:TYPE:ID or device:TYPE or device:*
                    let (ty, id) = match v.split_once(':') {
                        Some((ty, id)) => (ty, Some(id)),
                        None => (v, None),
                    };
                    if ty != "*" {
                        d.device_type = Some(ty.to_ascii_uppercase());
                    }
                    if let Some(id) = id {
                        d.id = parse_index(s, id)?;
                    }
                }
                ty if !ty.is_empty()
                    && ty.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    // legacy '/cpu:0' form
                    d.device_type = Some(ty.to_ascii_uppercase());
                    d.id = parse_index(s, v)?;
                }
                _ => return Err(bad(s, &format!("unknown field '{k}'"))),
            }
            i += 1;
        }
        Ok(d)
    }

    /// True when every field is set.
    pub fn is_fully_specified(&self) -> bool {
        self.job.is_some()
            && self.replica.is_some()
            && self.task.is_some()
            && self.device_type.is_some()
            && self.id.is_some()
    }

    /// True when `full` satisfies every field this spec sets.
    pub fn matches(&self, full: &DeviceName) -> bool {
        fn ok<T: PartialEq>(a: &Option<T>, b: &Option<T>) -> bool {
            a.is_none() || a == b
        }
        ok(&self.job, &full.job)
            && ok(&self.replica, &full.replica)
            && ok(&self.task, &full.task)
            && ok(&self.device_type, &full.device_type)
            && ok(&self.id, &full.id)
    }

    /// This spec with every field `other` sets replaced by `other`'s (TensorFlow's
    /// `DeviceSpec.merge_from`: no conflicts, `other` wins).
    ///
    /// # Examples
    /// ```
    /// use actorflow_graph::DeviceName;
    /// let ps = DeviceName::parse("/job:ps/task:1").unwrap();
    /// let inner = DeviceName::parse("/task:3/device:CPU:0").unwrap();
    /// assert_eq!(ps.overridden_by(&inner).to_string(), "/job:ps/task:3/device:CPU:0");
    /// ```
    pub fn overridden_by(&self, other: &DeviceName) -> DeviceName {
        DeviceName {
            job: other.job.clone().or_else(|| self.job.clone()),
            replica: other.replica.or(self.replica),
            task: other.task.or(self.task),
            device_type: other
                .device_type
                .clone()
                .or_else(|| self.device_type.clone()),
            id: other.id.or(self.id),
        }
    }

    /// The spec satisfying both, or `InvalidArgument` when they conflict.
    pub fn merge(&self, other: &DeviceName) -> Result<DeviceName> {
        fn pick<T: Clone + PartialEq + fmt::Debug>(
            a: &Option<T>,
            b: &Option<T>,
            what: &str,
            x: &DeviceName,
            y: &DeviceName,
        ) -> Result<Option<T>> {
            match (a, b) {
                (Some(p), Some(q)) if p != q => Err(Status::invalid_argument(format!(
                    "cannot merge devices with incompatible {what}s: '{x}' and '{y}'"
                ))),
                (Some(p), _) => Ok(Some(p.clone())),
                (None, q) => Ok(q.clone()),
            }
        }
        Ok(DeviceName {
            job: pick(&self.job, &other.job, "job", self, other)?,
            replica: pick(&self.replica, &other.replica, "replica", self, other)?,
            task: pick(&self.task, &other.task, "task", self, other)?,
            device_type: pick(&self.device_type, &other.device_type, "type", self, other)?,
            id: pick(&self.id, &other.id, "id", self, other)?,
        })
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(j) = &self.job {
            write!(f, "/job:{j}")?;
        }
        if let Some(r) = self.replica {
            write!(f, "/replica:{r}")?;
        }
        if let Some(t) = self.task {
            write!(f, "/task:{t}")?;
        }
        match (&self.device_type, self.id) {
            (Some(ty), Some(id)) => write!(f, "/device:{ty}:{id}"),
            (Some(ty), None) => write!(f, "/device:{ty}:*"),
            (None, Some(id)) => write!(f, "/device:*:{id}"),
            (None, None) => Ok(()),
        }
    }
}

impl std::str::FromStr for DeviceName {
    type Err = Status;
    fn from_str(s: &str) -> Result<DeviceName> {
        DeviceName::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_and_partial_names() {
        let full = DeviceName::parse("/job:localhost/replica:0/task:0/device:CPU:0").unwrap();
        assert!(full.is_fully_specified());
        assert_eq!(full, DeviceName::local_cpu(0));
        assert_eq!(
            full.to_string(),
            "/job:localhost/replica:0/task:0/device:CPU:0"
        );
        let p = DeviceName::parse("/device:CPU:1").unwrap();
        assert_eq!(p.id, Some(1));
        assert!(!p.matches(&full));
        assert!(p.matches(&DeviceName::local_cpu(1)));
        let legacy = DeviceName::parse("/cpu:0").unwrap();
        assert_eq!(legacy.device_type.as_deref(), Some("CPU"));
        assert!(legacy.matches(&full));
        let any_cpu = DeviceName::parse("/device:CPU:*").unwrap();
        assert!(any_cpu.matches(&DeviceName::local_cpu(3)));
        let task = DeviceName::parse("/job:worker/task:3").unwrap();
        assert_eq!((task.job.as_deref(), task.task), (Some("worker"), Some(3)));
        assert!(DeviceName::parse("").unwrap().matches(&full));
        for bad in ["/job", "/device:CPU:x", "/replica:-1", "/foo bar:1"] {
            assert!(DeviceName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn merges_constraints() {
        let a = DeviceName::parse("/job:localhost").unwrap();
        let b = DeviceName::parse("/device:CPU:1").unwrap();
        let m = a.merge(&b).unwrap();
        assert_eq!(m.to_string(), "/job:localhost/device:CPU:1");
        assert!(b
            .merge(&DeviceName::parse("/device:CPU:0").unwrap())
            .is_err());
    }
}
